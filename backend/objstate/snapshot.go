package objstate

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/google/btree"
	"golang.org/x/sync/errgroup"
)

// A snapshot is the whole state of a namespace after one commit, in parts
// of JSON lines: each part starts with a line naming the snapshot, then
// holds records in key order and, after the last record, events in id
// order. A snapshot is written once, under a name of its own, before the
// head names it; until then no reader looks at it.

// frozen is a namespace's state after commit pos, held still (the key
// order cloned, copy on write; the event slice as it was) so that it can
// be written while the namespace goes on.
type frozen struct {
	pos, rev, event int64
	idsFrom         int64
	ids             []string
	order           *btree.BTreeG[*rec]
	evs             []*event
}

// freeze holds d still; the caller holds the space's write lock.
func (d *data) freeze() *frozen {
	f := &frozen{pos: d.pos, rev: d.rev, event: d.log.next() - 1, order: d.order.Clone(), evs: d.log.evs}
	f.idsFrom, f.ids = d.lastIDs()
	return f
}

type partHeader struct {
	Format    int    `json:"format"`
	Namespace string `json:"namespace"`
	Pos       int64  `json:"pos"`
	Revision  int64  `json:"revision"`
	Event     int64  `json:"event"`
	Part      int    `json:"part"`
	// Commits are the ids of the last commits, up to Pos (part 0 only).
	Commits []string `json:"commit_ids,omitempty"`
}

func appendRecordLine(b []byte, r *rec) []byte {
	b = append(b, '{')
	b = appendStringField(b, "key", r.key)
	b = appendValue(b, "", r.value)
	if r.writer != "" {
		b = appendStringField(b, "writer", r.writer)
	}
	b = appendIntField(b, "revision", r.rev)
	b = appendIntField(b, "created", r.crev)
	if r.upd != zeroMs {
		b = appendTimeField(b, "time", r.upd)
	}
	if r.exp != 0 {
		b = appendTimeField(b, "expires", r.exp)
	}
	return append(b, '}', '\n')
}

func appendEventLine(b []byte, e *event) []byte {
	b = append(b, '{')
	b = appendIntField(b, "id", e.id)
	b = appendIntField(b, "revision", e.rev)
	b = appendStringField(b, "key", e.key)
	b = appendStringField(b, "op", e.op)
	b = appendValue(b, "", e.value)
	b = appendValue(b, "prev_", e.prev)
	if e.writer != "" {
		b = appendStringField(b, "writer", e.writer)
	}
	b = appendTimeField(b, "time", e.time)
	return append(b, '}', '\n')
}

// parts cuts f into parts of about partBytes each and calls put with each,
// numbered from 0, as it goes.
func (f *frozen) parts(ns string, partBytes int, put func(i int, b []byte) error) error {
	var b []byte
	n, lines := 0, 0
	start := func() {
		ph := partHeader{Format: formatVersion, Namespace: ns, Pos: f.pos, Revision: f.rev, Event: f.event, Part: n}
		if n == 0 {
			ph.Commits = f.ids
		}
		hj, _ := json.Marshal(ph)
		b = append(make([]byte, 0, min(partBytes, 1<<16)+4096), hj...)
		b = append(b, '\n')
		lines = 0
	}
	flush := func() error {
		err := put(n, b)
		n++
		start()
		return err
	}
	start()
	var err error
	f.order.Ascend(func(r *rec) bool {
		b = appendRecordLine(b, r)
		lines++
		if len(b) >= partBytes {
			err = flush()
		}
		return err == nil
	})
	if err != nil {
		return err
	}
	for _, e := range f.evs {
		b = appendEventLine(b, e)
		lines++
		if len(b) >= partBytes {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if lines > 0 || n == 0 {
		return put(n, b)
	}
	return nil
}

// lineJSON is a record or (with an id) an event line of a part.
type lineJSON struct {
	ID       int64   `json:"id"`
	Key      string  `json:"key"`
	Op       string  `json:"op"`
	Writer   string  `json:"writer"`
	Revision int64   `json:"revision"`
	Created  int64   `json:"created"`
	Time     *msTime `json:"time"`
	Expires  msTime  `json:"expires"`
	valueJSON
	prevJSON
}

// loadedPart is one part read back.
type loadedPart struct {
	hdr  partHeader
	recs []*rec
	evs  []*event
}

func decodePart(b []byte, want *snapRef, i int) (*loadedPart, error) {
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte{'\n'})
	p := &loadedPart{}
	if err := json.Unmarshal(lines[0], &p.hdr); err != nil {
		return nil, fmt.Errorf("%w: snapshot part %s: %v", errFormat, want.Parts[i], err)
	}
	if p.hdr.Format != formatVersion || p.hdr.Pos != want.Pos || p.hdr.Part != i {
		return nil, fmt.Errorf("%w: snapshot part %s is not part %d of the snapshot at %d", errFormat, want.Parts[i], i, want.Pos)
	}
	for _, line := range lines[1:] {
		var lj lineJSON
		if err := json.Unmarshal(line, &lj); err != nil {
			return nil, fmt.Errorf("%w: snapshot part %s: %v", errFormat, want.Parts[i], err)
		}
		t := zeroMs
		if lj.Time != nil {
			t = int64(*lj.Time)
		}
		if lj.ID != 0 {
			p.evs = append(p.evs, &event{id: lj.ID, rev: lj.Revision, key: lj.Key, op: lj.Op, writer: lj.Writer,
				value: lj.valueJSON.get(), prev: lj.prevJSON.get(), time: t})
			continue
		}
		p.recs = append(p.recs, &rec{key: lj.Key, writer: lj.Writer, value: lj.valueJSON.get(), rev: lj.Revision,
			crev: lj.Created, upd: t, exp: int64(lj.Expires)})
	}
	return p, nil
}

// loadSnapshot reads the snapshot ref names (its parts in parallel) into
// a new data.
func (s *space) loadSnapshot(ctx context.Context, ref *snapRef) (*data, error) {
	parts := make([]*loadedPart, len(ref.Parts))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for i, key := range ref.Parts {
		g.Go(func() error {
			obj, err := s.d.read(gctx, s.dir+key, "")
			if err != nil {
				return err
			}
			parts[i], err = decodePart(obj.Data, ref, i)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	d := newData()
	d.pos, d.rev = ref.Pos, parts[0].hdr.Revision
	if ids := parts[0].hdr.Commits; len(ids) > 0 {
		d.ids, d.idsFrom = ids, ref.Pos-int64(len(ids))+1
	}
	var evs []*event
	for _, p := range parts {
		if p.hdr.Revision != d.rev || p.hdr.Event != parts[0].hdr.Event {
			return nil, fmt.Errorf("%w: the parts of snapshot %d disagree", errFormat, ref.Pos)
		}
		for _, r := range p.recs {
			d.put(r)
		}
		evs = append(evs, p.evs...)
	}
	last := parts[0].hdr.Event
	d.log = newEventLog(last - int64(len(evs)) + 1)
	for i, e := range evs {
		if e.id != d.log.first+int64(i) {
			return nil, fmt.Errorf("%w: snapshot %d: event ids are not consecutive", errFormat, ref.Pos)
		}
		d.log.add(e)
	}
	return d, nil
}

// writeSnapshot writes f's parts under snap/<pos>-<id>/ and returns the
// snapshot's reference.
func (s *space) writeSnapshot(ctx context.Context, f *frozen) (*snapRef, error) {
	name := fmt.Sprintf("snap/%012d-%s/", f.pos, newID()[:8])
	ref := &snapRef{Pos: f.pos, started: time.Now()}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	err := f.parts(s.ns, s.d.opts.SnapshotPartBytes, func(i int, b []byte) error {
		key := fmt.Sprintf("%spart-%05d.jsonl", name, i)
		mu.Lock()
		ref.Parts = append(ref.Parts, key)
		ref.Bytes += int64(len(b))
		mu.Unlock()
		g.Go(func() error {
			_, err := s.d.write(gctx, s.dir+key, b, Cond{})
			return err
		})
		return gctx.Err()
	})
	if werr := g.Wait(); err == nil {
		err = werr
	}
	if err != nil {
		return nil, err
	}
	return ref, nil
}
