package pyimport

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/statesidecar/state"
)

// The Python sidecar's Redis key prefixes (python-sidecar.md §7.2).
const (
	kvPrefix      = "kv:"
	leasePrefix   = "lease:"
	metaPrefix    = "wf:meta:"
	stepPrefix    = "wf:step:"
	sessionPrefix = "session:"
	indexKey      = "wf:index"
)

// redisReader reads a Python sidecar's Redis. It lists the Python keys
// with one SCAN when it opens, and reads them in batches.
type redisReader struct {
	url   string // without password
	rdb   *redis.Client
	kv    []string
	lease []string
	meta  []string
	sess  []string
	// steps are the output keys by run id; badSteps those whose step is not
	// a number.
	steps    map[string][]stepKey
	nSteps   int
	badSteps int
	dangling int // ids in wf:index without a wf:meta key
}

type stepKey struct {
	key  string
	step int64
}

// OpenRedis connects to the Python sidecar's Redis at rawURL (its
// REDIS_URL: redis:// or rediss://, with the database number as the path)
// and lists its keys, read-only. A Redis without any Python key (kv:*,
// lease:*, wf:meta:*, wf:step:*, wf:index, session:*) is an error wrapping
// ErrNotPython. Redis Cluster is not supported, as the Python sidecar did
// not support it.
func OpenRedis(ctx context.Context, rawURL string) (*Source, error) {
	opts, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("pyimport: the Python sidecar's Redis URL: %w", err)
	}
	u, _ := url.Parse(rawURL)
	r := &redisReader{url: u.Redacted(), rdb: redis.NewClient(opts), steps: map[string][]stepKey{}}
	if err := r.list(ctx); err != nil {
		r.rdb.Close()
		return nil, err
	}
	return &Source{r: r}, nil
}

// list finds the Python keys with one pass of SCAN over the database.
func (r *redisReader) list(ctx context.Context) error {
	var index bool
	others := 0
	iter := r.rdb.Scan(ctx, 0, "", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		switch {
		case strings.HasPrefix(k, kvPrefix):
			r.kv = append(r.kv, k)
		case strings.HasPrefix(k, leasePrefix):
			r.lease = append(r.lease, k)
		case strings.HasPrefix(k, metaPrefix):
			r.meta = append(r.meta, k)
		case strings.HasPrefix(k, sessionPrefix):
			r.sess = append(r.sess, k)
		case strings.HasPrefix(k, stepPrefix):
			r.nSteps++
			rest := k[len(stepPrefix):]
			i := strings.LastIndexByte(rest, ':')
			step, err := strconv.ParseInt(rest[i+1:], 10, 64)
			if i < 0 || err != nil {
				r.badSteps++
				continue
			}
			r.steps[rest[:i]] = append(r.steps[rest[:i]], stepKey{k, step})
		case k == indexKey:
			index = true
		default:
			others++
		}
	}
	if err := iter.Err(); err != nil {
		return fmt.Errorf("pyimport: list the keys of %s: %w", r, err)
	}
	if len(r.kv)+len(r.lease)+len(r.meta)+len(r.sess)+r.nSteps == 0 && !index {
		return fmt.Errorf("pyimport: Redis %s: %w: it has no key kv:*, lease:*, wf:meta:*, wf:step:*, wf:index or session:* (it holds %d other keys)",
			r.url, ErrNotPython, others)
	}
	for _, ks := range [][]string{r.kv, r.lease, r.meta, r.sess} {
		slices.Sort(ks)
	}
	if index {
		ids, err := r.rdb.SMembers(ctx, indexKey).Result()
		if err != nil {
			return fmt.Errorf("pyimport: read wf:index of %s: %w", r, err)
		}
		for _, id := range ids {
			if _, ok := slices.BinarySearch(r.meta, metaPrefix+id); !ok {
				r.dangling++
			}
		}
	}
	return nil
}

func (r *redisReader) String() string { return "Python sidecar Redis " + r.url }

func (r *redisReader) close() error { return r.rdb.Close() }

func (r *redisReader) count(context.Context) (map[Kind]int, error) {
	return map[Kind]int{Keys: len(r.kv), Leases: len(r.lease), Runs: len(r.meta), Sessions: len(r.sess), Outputs: r.nSteps}, nil
}

// The Python sidecar keeps no history in Redis.
func (r *redisReader) historySource(context.Context) (string, error) { return "", nil }

func (r *redisReader) historyUpTo(context.Context, int64) (int, error) { return 0, nil }

func (r *redisReader) history(context.Context, int64, func([]item[state.ImportedEvent]) error) error {
	return nil
}

// value is a key's value and remaining lifetime as read, or why it could
// not be read.
type value struct {
	val     string
	ttl     time.Duration // 0: none
	gone    bool          // expired (or deleted) since the scan
	problem string
}

// read reads the values and remaining lifetimes of keys in one round trip.
func (r *redisReader) read(ctx context.Context, keys []string) ([]value, error) {
	start := time.Now()
	gets := make([]*redis.StringCmd, len(keys))
	ttls := make([]*redis.DurationCmd, len(keys))
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			gets[i], ttls[i] = p.Get(ctx, k), p.PTTL(ctx, k)
		}
		return nil
	})
	var perKey redis.Error // redis.Nil and WRONGTYPE are errors of single keys
	if err != nil && !errors.As(err, &perKey) {
		return nil, fmt.Errorf("pyimport: read %s: %w", r, err)
	}
	out := make([]value, len(keys))
	for i := range keys {
		v, err := gets[i].Result()
		switch {
		case errors.Is(err, redis.Nil):
			out[i].gone = true
			continue
		case err != nil:
			out[i].problem = fmt.Sprintf("%s cannot be read as a string: %v", keys[i], err)
			continue
		}
		out[i].val = v
		if d, err := ttls[i].Result(); err == nil && d > 0 {
			// The lifetime counts from when Redis answered, after start.
			left := time.Until(start.Add(d))
			if left < time.Millisecond {
				out[i].gone = true
			}
			out[i].ttl = left
		}
	}
	return out, nil
}

// batches calls fn with the keys in batches of batchSize and their values.
func (r *redisReader) batches(ctx context.Context, keys []string, fn func(keys []string, vals []value) error) error {
	for len(keys) > 0 {
		n := min(len(keys), batchSize)
		vals, err := r.read(ctx, keys[:n])
		if err != nil {
			return err
		}
		if err := fn(keys[:n], vals); err != nil {
			return err
		}
		keys = keys[n:]
	}
	return nil
}

func (r *redisReader) entries(ctx context.Context, fn func([]item[state.ImportedEntry]) error) error {
	return r.batches(ctx, r.kv, func(keys []string, vals []value) error {
		page := make([]item[state.ImportedEntry], len(keys))
		for i, v := range vals {
			k := keys[i][len(kvPrefix):]
			page[i] = item[state.ImportedEntry]{id: k, expired: v.gone, problem: v.problem,
				rec: state.ImportedEntry{Key: k, Value: []byte(v.val), TTL: v.ttl}}
		}
		return fn(page)
	})
}

func (r *redisReader) sessions(ctx context.Context, fn func([]item[state.ImportedSession]) error) error {
	return r.batches(ctx, r.sess, func(keys []string, vals []value) error {
		page := make([]item[state.ImportedSession], len(keys))
		for i, v := range vals {
			id := keys[i][len(sessionPrefix):]
			page[i] = item[state.ImportedSession]{id: id, expired: v.gone, problem: v.problem,
				rec: state.ImportedSession{ID: id, Context: []byte(v.val), TTL: v.ttl}}
		}
		return fn(page)
	})
}

func (r *redisReader) leases(ctx context.Context, fn func([]item[state.ImportedLease]) error) error {
	return r.batches(ctx, r.lease, func(keys []string, vals []value) error {
		page := make([]item[state.ImportedLease], len(keys))
		for i, v := range vals {
			res := keys[i][len(leasePrefix):]
			it := item[state.ImportedLease]{id: res, expired: v.gone, problem: v.problem}
			var l struct {
				Holder *string `json:"holder_id"`
			}
			switch {
			case it.expired || it.problem != "":
			case v.ttl == 0:
				it.problem = "the lease has no expiry (the Python sidecar sets one on every lease)"
			case json.Unmarshal([]byte(v.val), &l) != nil || l.Holder == nil:
				it.problem = fmt.Sprintf("the lease %s has no holder_id", v.val)
			default:
				it.rec = state.ImportedLease{Resource: res, Holder: *l.Holder, TTL: v.ttl}
			}
			page[i] = it
		}
		return fn(page)
	})
}

// meta is a run as the Python sidecar keeps it in Redis (WorkflowMeta).
type meta struct {
	Name      string          `json:"name"`
	Status    string          `json:"status"`
	Tags      json.RawMessage `json:"tags"`
	AgentID   *string         `json:"agent_id"`
	LastStep  float64         `json:"last_step"`
	CreatedAt float64         `json:"created_at"`
	UpdatedAt float64         `json:"updated_at"`
}

func (r *redisReader) runs(ctx context.Context, fn func([]item[state.ImportedRun]) error) error {
	return r.batches(ctx, r.meta, func(keys []string, vals []value) error {
		page := make([]item[state.ImportedRun], len(keys))
		var outKeys []string
		for i, v := range vals {
			id := keys[i][len(metaPrefix):]
			it := item[state.ImportedRun]{id: id, problem: v.problem}
			if v.gone && it.problem == "" {
				it.problem = "its wf:meta key disappeared while the import ran"
			}
			var m meta
			if it.problem == "" {
				if err := json.Unmarshal([]byte(v.val), &m); err != nil {
					it.problem = fmt.Sprintf("wf:meta:%s is not a WorkflowMeta JSON object: %v", id, err)
				} else if m.LastStep != math.Trunc(m.LastStep) || math.Abs(m.LastStep) > 1<<53 {
					it.problem = fmt.Sprintf("last_step %v is not a whole number", m.LastStep)
				}
			}
			if it.problem == "" {
				tags := string(m.Tags)
				if t := bytes.TrimSpace(m.Tags); len(t) == 0 || string(t) == "[]" || string(t) == "null" {
					tags = "{}" // Lua's cjson writes an empty table as []
				}
				it.rec, it.problem = pyRun("wf:meta:"+id+" ", id, m.Name, m.Status, tags, m.AgentID, int64(m.LastStep), m.CreatedAt, m.UpdatedAt)
				it.rec.ID = id
			}
			for _, s := range r.steps[id] {
				outKeys = append(outKeys, s.key)
				it.rec.Outputs = append(it.rec.Outputs, state.StepOutput{Step: s.step})
			}
			page[i] = it
		}
		if err := r.outputs(ctx, page, outKeys); err != nil {
			return err
		}
		return fn(page)
	})
}

// outputs reads the output values of the runs of page, whose Outputs hold
// their steps, keys in order.
func (r *redisReader) outputs(ctx context.Context, page []item[state.ImportedRun], keys []string) error {
	var vals []value
	err := r.batches(ctx, keys, func(_ []string, vs []value) error {
		vals = append(vals, vs...)
		return nil
	})
	if err != nil {
		return err
	}
	for i := range page {
		it := &page[i]
		for j := range it.rec.Outputs {
			v := vals[0]
			vals = vals[1:]
			switch {
			case v.problem != "" && it.problem == "":
				it.problem = v.problem
			case v.gone && it.problem == "":
				it.problem = fmt.Sprintf("the output of step %d disappeared while the import ran", it.rec.Outputs[j].Step)
			}
			it.rec.Outputs[j].Output = []byte(v.val)
		}
		slices.SortFunc(it.rec.Outputs, func(a, b state.StepOutput) int { return cmp.Compare(a.Step, b.Step) })
	}
	return nil
}

// skipped counts the output keys of runs without a wf:meta key and those
// that do not end in a step number.
func (r *redisReader) skipped(context.Context) (int, []string, error) {
	orphans := 0
	for id, ks := range r.steps {
		if _, ok := slices.BinarySearch(r.meta, metaPrefix+id); !ok {
			orphans += len(ks)
		}
	}
	var notes []string
	if orphans > 0 {
		notes = append(notes, fmt.Sprintf("%d wf:step keys belong to no run (no wf:meta key): not imported", orphans))
	}
	if r.badSteps > 0 {
		notes = append(notes, fmt.Sprintf("%d wf:step keys do not end in a step number: not imported", r.badSteps))
	}
	return orphans + r.badSteps, notes, nil
}

func (r *redisReader) notes() []string {
	if r.dangling == 0 {
		return nil
	}
	return []string{fmt.Sprintf("%d run ids in wf:index have no wf:meta key (the Python sidecar lists none of them): nothing to import", r.dangling)}
}
