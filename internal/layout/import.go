package layout

// MarkPrefix holds records that remember what a namespace was given from
// outside, such as how far the history of an imported source has been
// copied. They are not entries, runs, leases or sessions: no count, listing
// or index sees them, and Reset removes them with everything else.
const MarkPrefix = "m/"

// ImportMark returns the record key that remembers how much of the history
// of import source source a namespace holds; its value is ImportMarkValue
// JSON.
func ImportMark(source string) string { return MarkPrefix + "import/" + source }

// ImportMarkValue is the value of an ImportMark record.
type ImportMarkValue struct {
	// Seq is the position, in the source's own log, of the last event
	// copied.
	Seq int64 `json:"seq"`
}
