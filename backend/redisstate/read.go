package redisstate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/statesidecar/state/backend"
)

// Get implements backend.Driver in one round trip: with a given now, one
// GET judged here; with a zero now, a small script that reads Redis's
// clock too when the record can expire (lua/get.lua), which the Gets of
// one namespace made at the same moment share (batch.go).
func (d *Driver) Get(ctx context.Context, ns, key string, now time.Time) (backend.Record, error) {
	if now.IsZero() {
		r, err := d.gets.do(ctx, ns, now, key)
		if err != nil {
			return backend.Record{}, err
		}
		if !r.Live() {
			return backend.Record{}, backend.ErrNotFound
		}
		return r, nil
	}
	var v any
	s, err := d.rdb.Get(ctx, d.base(ns)+":r:"+key).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return backend.Record{}, d.fail(ctx, "get", err)
	}
	if err == nil {
		v = s
	}
	r, err := toRecord(key, v, now.UnixMilli())
	if err != nil {
		return backend.Record{}, d.fail(ctx, "get", err)
	}
	if !r.Live() {
		return backend.Record{}, backend.ErrNotFound
	}
	return r, nil
}

// getArgs appends the script argument of a Get of key.
func getArgs(args []any, key string) []any { return append(args, key) }

// getReply decodes lua/get.lua's reply for key: its record, nil, or
// {record, TIME seconds, TIME microseconds} for a record that can expire.
func getReply(key string, v any) (backend.Record, error) {
	var nowMs int64
	if s, ok := v.([]any); ok {
		if len(s) != 3 {
			return backend.Record{}, fmt.Errorf("unexpected reply (%d elements)", len(s))
		}
		sec, err1 := asInt(s[1])
		usec, err2 := asInt(s[2])
		if err1 != nil || err2 != nil {
			return backend.Record{}, fmt.Errorf("unexpected TIME reply %v", s[1:])
		}
		v, nowMs = s[0], sec*1000+usec/1000
	}
	return toRecord(key, v, nowMs)
}

// GetMany implements backend.Driver in one script.
func (d *Driver) GetMany(ctx context.Context, q *backend.GetQuery) ([]backend.Record, error) {
	recs, err := d.getMany(ctx, q.NS, q.Keys, q.Now)
	if err != nil {
		return nil, d.fail(ctx, "get_many", err)
	}
	if !q.IncludeExpired {
		for i, r := range recs {
			if r.Expired {
				recs[i] = backend.Record{Key: r.Key}
			}
		}
	}
	return recs, nil
}

func (d *Driver) getMany(ctx context.Context, ns string, keys []string, now time.Time) ([]backend.Record, error) {
	args := make([]any, 0, 1+len(keys))
	args = append(args, nowArg(now))
	for _, k := range keys {
		args = append(args, k)
	}
	v, err := getManyScript.Run(ctx, d.rdb, []string{d.base(ns)}, args...).Result()
	if err != nil {
		return nil, err
	}
	s, err := asSlice(v)
	if err != nil || len(s) != 1+len(keys) {
		return nil, fmt.Errorf("unexpected reply to get_many (%d elements): %v", len(s), err)
	}
	nowMs, err := asInt(s[0])
	if err != nil {
		return nil, err
	}
	out := make([]backend.Record, len(keys))
	for i, k := range keys {
		if out[i], err = toRecord(k, s[1+i], nowMs); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// List implements backend.Driver: a walk of the namespace's lex-ordered
// index of keys, skipping expired records, in one script.
func (d *Driver) List(ctx context.Context, q *backend.ListQuery) ([]backend.Record, error) {
	lo, hi := lexRange(q.Prefix)
	if q.After != "" && q.After >= q.Prefix {
		lo = "(" + q.After
	}
	keysOnly := "0"
	if q.KeysOnly {
		keysOnly = "1"
	}
	v, err := listScript.Run(ctx, d.rdb, []string{d.base(q.NS)}, nowArg(q.Now), lo, hi, q.Limit, keysOnly).Result()
	if err != nil {
		return nil, d.fail(ctx, "list", err)
	}
	s, err := asSlice(v)
	if err != nil || len(s) == 0 || (len(s)-1)%2 != 0 {
		return nil, d.fail(ctx, "list", fmt.Errorf("unexpected reply (%d elements): %v", len(s), err))
	}
	nowMs, _ := asInt(s[0])
	out := make([]backend.Record, 0, (len(s)-1)/2)
	for i := 1; i < len(s); i += 2 {
		r, err := toRecord(asString(s[i]), s[i+1], nowMs)
		if err != nil {
			return nil, d.fail(ctx, "list", err)
		}
		out = append(out, r)
	}
	return out, nil
}

// Count implements backend.Driver in one script whose cost does not grow
// with the number of live records.
func (d *Driver) Count(ctx context.Context, q *backend.CountQuery) (backend.Counts, error) {
	args := make([]any, 0, 1+3*len(q.Prefixes))
	args = append(args, nowArg(q.Now))
	for _, p := range q.Prefixes {
		lo, hi := lexRange(p)
		args = append(args, p, lo, hi)
	}
	v, err := countScript.Run(ctx, d.rdb, []string{d.base(q.NS)}, args...).Result()
	if err != nil {
		return backend.Counts{}, d.fail(ctx, "count", err)
	}
	s, err := asSlice(v)
	if err != nil || len(s) != 1+len(q.Prefixes) {
		return backend.Counts{}, d.fail(ctx, "count", fmt.Errorf("unexpected reply (%d elements): %v", len(s), err))
	}
	c := backend.Counts{Prefixes: make([]int64, len(q.Prefixes))}
	c.Events, _ = asInt(s[0])
	for i := range q.Prefixes {
		c.Prefixes[i], _ = asInt(s[1+i])
	}
	return c, nil
}

// History implements backend.Driver in one script.
func (d *Driver) History(ctx context.Context, q *backend.HistoryQuery) ([]backend.Event, error) {
	v, err := historyScript.Run(ctx, d.rdb, []string{d.base(q.NS)}, q.Key, q.Before, q.Limit).Result()
	if err != nil {
		return nil, d.fail(ctx, "history", err)
	}
	s, err := asSlice(v)
	if err != nil || len(s)%2 != 0 {
		return nil, d.fail(ctx, "history", fmt.Errorf("unexpected reply (%d elements): %v", len(s), err))
	}
	out := make([]backend.Event, 0, len(s)/2)
	for i := 0; i < len(s); i += 2 {
		id, err := asInt(s[i])
		if err != nil {
			return nil, d.fail(ctx, "history", err)
		}
		e, err := unpackEvent(asString(s[i+1]))
		if err != nil {
			return nil, d.fail(ctx, "history", fmt.Errorf("event %d: %w", id, err))
		}
		e.ID = id
		out = append(out, e)
	}
	return out, nil
}

// evHeader is the length of a packed event's header (lua/ev.lua): the
// little-endian revision and time ms (8 bytes each), then the lengths of
// key, op, writer, value and prev (4 bytes each).
const evHeader = 36

// unpackEvent decodes an event as lua/ev.lua packs it: the header, then
// key, op, writer, value and prev.
func unpackEvent(s string) (backend.Event, error) {
	var e backend.Event
	if len(s) < evHeader {
		return e, fmt.Errorf("corrupt event header")
	}
	body := s[evHeader:]
	var parts [5]string
	for i := range parts {
		l := le32(s[16+4*i:])
		if l < 0 || int64(len(body)) < l {
			return e, fmt.Errorf("corrupt event body")
		}
		parts[i], body = body[:l], body[l:]
	}
	e.Revision, e.Time = le64(s), fromMs(le64(s[8:]))
	e.Key, e.Op, e.Writer = parts[0], parts[1], parts[2]
	if parts[3] != "" {
		e.Value = []byte(parts[3])
	}
	if parts[4] != "" {
		e.Prev = []byte(parts[4])
	}
	return e, nil
}
