package objstate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// head is a namespace's head object, the only object the driver ever
// overwrites (by compare-and-swap on its tag): where the namespace's
// state is. It names the snapshot (the state after commit snap.pos), the
// segments holding the commits after it, and holds the newest commits
// itself (commits, the last of which is at pos).
type head struct {
	pos   int64 // the newest commit
	rev   int64 // the last revision given, as of pos
	event int64 // the last event id given, as of pos
	snap  *snapRef
	segs  []segRef
	// commits are the commits after the last segment (or the snapshot),
	// as written, up to pos.
	commits []json.RawMessage
}

// snapRef names a snapshot: the state after commit pos, in parts.
type snapRef struct {
	Pos   int64    `json:"pos"`
	Parts []string `json:"parts"`
	Bytes int64    `json:"bytes"`
	// started is when its writer began writing it (not stored).
	started time.Time
}

// segRef names a segment: the commits from From to To. A segment written
// from a head's commits is of level 0; MaxSegments segments of one level
// in a row are merged into one of the next.
type segRef struct {
	From  int64  `json:"from"`
	To    int64  `json:"to"`
	Key   string `json:"key"`
	Bytes int64  `json:"bytes"`
	Level int    `json:"level,omitempty"`
}

// firstInline returns the position of the head's first inline commit (pos+1
// when it holds none).
func (h *head) firstInline() int64 { return h.pos - int64(len(h.commits)) + 1 }

// base returns the position from which the head's commits are all stored:
// the snapshot's, or 0.
func (h *head) base() int64 {
	if h.snap != nil {
		return h.snap.Pos
	}
	return 0
}

func (h *head) inlineBytes() int {
	n := 0
	for _, c := range h.commits {
		n += len(c) + 2
	}
	return n
}

func (h *head) segBytes() int64 {
	var n int64
	for _, s := range h.segs {
		n += s.Bytes
	}
	return n
}

// encode writes the head: one line of fields, then one commit per line.
func (h *head) encode(ns string) []byte {
	b := make([]byte, 0, 512+h.inlineBytes())
	b = append(b, '{')
	b = appendIntField(b, "format", formatVersion)
	b = appendStringField(b, "namespace", ns)
	b = appendIntField(b, "pos", h.pos)
	b = appendIntField(b, "revision", h.rev)
	b = appendIntField(b, "event", h.event)
	if h.snap != nil {
		j, _ := json.Marshal(h.snap)
		b = append(appendField(b, "snapshot"), j...)
	}
	if len(h.segs) > 0 {
		j, _ := json.Marshal(h.segs)
		b = append(appendField(b, "segments"), j...)
	}
	b = append(appendField(b, "commits"), '[')
	for i, c := range h.commits {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '\n')
		b = append(b, c...)
	}
	if len(h.commits) > 0 {
		b = append(b, '\n')
	}
	return append(b, ']', '}', '\n')
}

type headJSON struct {
	Format   int               `json:"format"`
	Pos      int64             `json:"pos"`
	Revision int64             `json:"revision"`
	Event    int64             `json:"event"`
	Snapshot *snapRef          `json:"snapshot"`
	Segments []segRef          `json:"segments"`
	Commits  []json.RawMessage `json:"commits"`
}

func decodeHead(b []byte) (*head, error) {
	var hj headJSON
	if err := json.Unmarshal(b, &hj); err != nil {
		return nil, fmt.Errorf("%w: head: %v", errFormat, err)
	}
	if hj.Format != formatVersion {
		return nil, fmt.Errorf("%w: head has format %d; this driver reads format %d", errFormat, hj.Format, formatVersion)
	}
	h := &head{pos: hj.Pos, rev: hj.Revision, event: hj.Event, snap: hj.Snapshot, segs: hj.Segments, commits: hj.Commits}
	// From the snapshot on, every commit is in a segment or inline; the
	// first segment may begin before the snapshot.
	next := h.base() + 1
	for i, s := range h.segs {
		if s.To < next || s.From > next || (i > 0 && s.From != next) {
			return nil, fmt.Errorf("%w: head: segment %s covers %d-%d, expected from %d", errFormat, s.Key, s.From, s.To, next)
		}
		next = s.To + 1
	}
	if first := h.firstInline(); first > next || (len(h.segs) > 0 && first != next) || h.pos < h.base() {
		return nil, fmt.Errorf("%w: head: inline commits start at %d, expected %d", errFormat, h.firstInline(), next)
	}
	return h, nil
}

// encodeSegment writes the commits from..to as a segment object.
func encodeSegment(from, to int64, commits []json.RawMessage) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"format":%d,"from":%d,"to":%d,"commits":[`, formatVersion, from, to)
	for i, c := range commits {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
		b.Write(c)
	}
	b.WriteString("\n]}\n")
	return b.Bytes()
}

type segmentJSON struct {
	Format  int               `json:"format"`
	From    int64             `json:"from"`
	To      int64             `json:"to"`
	Commits []json.RawMessage `json:"commits"`
}

func decodeSegment(b []byte, want segRef) ([]json.RawMessage, error) {
	var sj segmentJSON
	if err := json.Unmarshal(b, &sj); err != nil {
		return nil, fmt.Errorf("%w: segment %s: %v", errFormat, want.Key, err)
	}
	if sj.Format != formatVersion || sj.From != want.From || sj.To != want.To || int64(len(sj.Commits)) != sj.To-sj.From+1 {
		return nil, fmt.Errorf("%w: segment %s does not hold commits %d-%d", errFormat, want.Key, want.From, want.To)
	}
	return sj.Commits, nil
}
