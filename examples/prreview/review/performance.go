package review

import (
	"path"
	"regexp"
	"strings"
)

const performanceAbout = "Accidental quadratic work over the diff: a walk of loop nesting by indentation (no parser), " +
	"then patterns that are costly inside a loop (linear searches, string building, regex compiles, queries, network calls, sleeps). " +
	"It sees only the hunks, so a finding is a place to look, not a measurement."

// loopSyntax recognises loop headers of one language; the first submatch
// of collection, if any, is what the loop iterates over.
type loopSyntax struct {
	header, collection *regexp.Regexp
}

var loopSyntaxes = map[string]loopSyntax{
	"py": {regexp.MustCompile(`^\s*(for\s+.+\s+in\s+.+:|while\s.+:)\s*(#.*)?$`),
		regexp.MustCompile(`\bin\s+([\w.]+(?:\(\))?)\s*:`)},
	"go": {regexp.MustCompile(`^\s*for\b.*\{\s*$`),
		regexp.MustCompile(`\brange\s+([\w.]+)`)},
	"js": {regexp.MustCompile(`^\s*(for\s*\(|while\s*\()|[\w.]+\.(forEach|map|flatMap|filter|reduce|some|every)\(`),
		regexp.MustCompile(`(?:\bof\s+([\w.]+)|([\w.]+)\.(?:forEach|map|flatMap|filter|reduce|some|every)\()`)},
}

// inLoop are patterns that cost a lot when they run once per iteration.
var inLoop = []struct {
	id, severity, message string
	langs                 string
	re                    *regexp.Regexp
}{
	{"query-in-loop", "high", "A database query runs once per iteration (N+1 queries): fetch the rows in one query before the loop.",
		"py go js", regexp.MustCompile(`(?i)\.(execute|query|queryrow|querycontext|queryrowcontext|find_one|findone|findunique)\(`)},
	{"request-in-loop", "medium", "A network request per iteration, one after the other: batch them or run them concurrently with a bound.",
		"py go js", regexp.MustCompile(`(requests\.(get|post|put)\(|http\.(Get|Post)\(|await fetch\(|\bfetch\()`)},
	{"linear-search-in-loop", "medium", "A linear search inside a loop makes the loop O(n²): build a set or map once, then look up in O(1).",
		"py go js", regexp.MustCompile(`(\.index\(|\.(includes|indexOf|find|findIndex)\(|slices\.(Contains|Index)\()`)},
	{"string-concat-in-loop", "medium", "Strings built with += in a loop copy the whole string each time (O(n²)): collect parts and join once.",
		"py go js", regexp.MustCompile(`^\s*[\w.\[\]"']+\s*\+=\s*(f?["'` + "`" + `]|str\(|fmt\.Sprint|string\()`)},
	{"regex-compile-in-loop", "medium", "A regular expression is compiled on every iteration: compile it once outside the loop.",
		"py go js", regexp.MustCompile(`(re\.compile\(|regexp\.(Must)?Compile\(|new RegExp\()`)},
	{"sleep-in-loop", "low", "Sleeping inside a loop makes its time grow with the input: use a ticker, backoff or batch.",
		"py go js", regexp.MustCompile(`(time\.sleep\(|time\.Sleep\(|await sleep\()`)},
}

var (
	pyListAssign = regexp.MustCompile(`^\s*(\w+)\s*(?::\s*[Ll]ist\b[^=]*)?=\s*(\[|list\()`)
	pyMembership = regexp.MustCompile(`\b(?:not\s+)?in\s+(\w+)\b`)
)

// lang is the language family of a path: py, go, js, or "".
func lang(p string) string {
	switch path.Ext(p) {
	case ".py":
		return "py"
	case ".go":
		return "go"
	case ".js", ".mjs", ".cjs", ".ts", ".tsx", ".jsx":
		return "js"
	}
	return ""
}

// indent is a line's indentation width, a tab counting as 4.
func indent(s string) int {
	n := 0
	for _, r := range s {
		switch r {
		case ' ':
			n++
		case '\t':
			n += 4
		default:
			return n
		}
	}
	return -1 // blank line
}

// loop is an open loop while walking a hunk.
type loop struct {
	indent     int
	collection string
	added      bool
}

// performance walks each hunk's new text, tracking which lines sit inside
// loops, and flags nested loops and costly calls inside loops on added
// lines.
func performance(f File) []Finding {
	lg := lang(f.Path)
	syn, ok := loopSyntaxes[lg]
	if !ok || f.Deleted {
		return nil
	}
	lists := map[string]bool{}
	if lg == "py" {
		for _, h := range f.Hunks {
			for _, l := range h.Lines {
				if m := pyListAssign.FindStringSubmatch(l.Text); m != nil && l.Kind != '-' {
					lists[m[1]] = true
				}
			}
		}
	}
	var out []Finding
	add := func(l Line, id, sev, msg string) {
		out = append(out, Finding{Kind: Performance, Rule: id, Severity: sev, File: f.Path, Line: l.N,
			Message: msg, Snippet: snippet(l.Text)})
	}
	for _, h := range f.Hunks {
		var open []loop
		for _, l := range h.Lines {
			if l.Kind == '-' {
				continue
			}
			ind := indent(l.Text)
			if ind < 0 {
				continue
			}
			for len(open) > 0 && ind <= open[len(open)-1].indent {
				if ind == open[len(open)-1].indent && !closes(lg, l.Text) && isContinuation(lg, l.Text) {
					break
				}
				open = open[:len(open)-1]
			}
			if l.Kind == '+' && len(open) > 0 {
				for _, p := range inLoop {
					if strings.Contains(p.langs, lg) && p.re.MatchString(l.Text) {
						add(l, p.id, p.severity, p.message)
					}
				}
				if lg == "py" && !syn.header.MatchString(l.Text) {
					for _, m := range pyMembership.FindAllStringSubmatch(l.Text, -1) {
						if lists[m[1]] {
							add(l, "linear-search-in-loop", "medium", "`in "+m[1]+"` searches a list on every iteration (O(n²)): make "+m[1]+" a set.")
							break
						}
					}
				}
			}
			if !syn.header.MatchString(l.Text) {
				continue
			}
			coll := ""
			if m := syn.collection.FindStringSubmatch(l.Text); m != nil {
				for _, g := range m[1:] {
					if g != "" {
						coll = g
						break
					}
				}
			}
			me := loop{indent: ind, collection: coll, added: l.Kind == '+'}
			if len(open) > 0 {
				outer := open[len(open)-1]
				if me.added || outer.added {
					switch {
					case coll != "" && coll == outer.collection:
						add(l, "quadratic-loop", "high", "A loop over `"+coll+"` nested in a loop over the same `"+coll+
							"`: O(n²) in its size. Index it in a map first, or compare only the pairs you need.")
					default:
						add(l, "nested-loop", "low", "A loop nested in a loop"+over(outer.collection)+
							": the cost is the product of both sizes; check that both stay small.")
					}
				}
			}
			open = append(open, me)
		}
	}
	return out
}

func over(c string) string {
	if c == "" {
		return ""
	}
	return " over `" + c + "`"
}

// closes reports whether a line at a loop's indentation is its closing brace.
func closes(lg, s string) bool {
	return lg != "py" && strings.HasPrefix(strings.TrimSpace(s), "}")
}

// isContinuation reports whether a line at a loop's own indentation still
// belongs to it: Python's "else:" of a for loop.
func isContinuation(lg, s string) bool {
	return lg == "py" && strings.TrimSpace(s) == "else:"
}
