package backendtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/statetest"
)

var t0 = statetest.Epoch

func putOp(key, val string, ttl time.Duration) backend.Op {
	return backend.Op{Kind: backend.OpPut, Key: key, Value: []byte(val), TTL: ttl, Time: t0}
}

func (e driverEnv) commit(t *testing.T, now time.Time, txn *backend.Txn) backend.Result {
	t.Helper()
	txn.NS, txn.Now = e.ns, now
	res, err := e.d.Commit(context.Background(), txn)
	if err != nil {
		t.Fatalf("Commit: %v", err)
	}
	return res
}

func (e driverEnv) put(t *testing.T, now time.Time, ops ...backend.Op) backend.Result {
	t.Helper()
	return e.commit(t, now, &backend.Txn{Then: ops})
}

func (e driverEnv) get(t *testing.T, now time.Time, key string) (backend.Record, bool) {
	t.Helper()
	r, err := e.d.Get(context.Background(), e.ns, key, now)
	if errors.Is(err, backend.ErrNotFound) {
		return r, false
	}
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	return r, true
}

func (e driverEnv) list(t *testing.T, q backend.ListQuery) []string {
	t.Helper()
	q.NS = e.ns
	if q.Limit == 0 {
		q.Limit = 1000
	}
	if q.Now.IsZero() {
		q.Now = t0
	}
	recs, err := e.d.List(context.Background(), &q)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	keys := []string{}
	for _, r := range recs {
		keys = append(keys, r.Key)
	}
	return keys
}

func (e driverEnv) history(t *testing.T, q backend.HistoryQuery) []backend.Event {
	t.Helper()
	q.NS = e.ns
	if q.Limit == 0 {
		q.Limit = 100
	}
	evs, err := e.d.History(context.Background(), &q)
	if err != nil {
		t.Fatalf("History: %v", err)
	}
	return evs
}

func (e driverEnv) count(t *testing.T, now time.Time, prefixes ...string) backend.Counts {
	t.Helper()
	c, err := e.d.Count(context.Background(), &backend.CountQuery{NS: e.ns, Prefixes: prefixes, Now: now})
	if err != nil {
		t.Fatalf("Count: %v", err)
	}
	return c
}

func driverCases() []testCase[driverEnv] {
	return []testCase[driverEnv]{
		{"GetOfAbsentKeyIsErrNotFound", func(t *testing.T, e driverEnv) {
			is := is.New(t)
			_, err := e.d.Get(context.Background(), e.ns, "nope", t0)
			is.True(errors.Is(err, backend.ErrNotFound)) // Get must return ErrNotFound for an absent key
		}},
		{"PutStoresEveryField", func(t *testing.T, e driverEnv) {
			is := is.New(t)
			val := string([]byte{'{', 0, 0xff, 'x', '}'})
			op := backend.Op{Kind: backend.OpPut, Key: "k", Value: []byte(val), Writer: "agent-1",
				TTL: 1500 * time.Millisecond, Time: t0.Add(-time.Second)}
			res := e.put(t, t0, op)
			is.True(res.Committed)     // a Commit without conditions commits
			is.True(res.Revision > 0)  // a committed write gets a positive revision
			is.True(res.Now.Equal(t0)) // Result.Now must echo Txn.Now
			r, ok := e.get(t, t0, "k")
			is.True(ok)                                                 // a put record must be readable
			is.Equal(string(r.Value), val)                              // Value must round-trip as opaque bytes
			is.Equal(r.Writer, "agent-1")                               // Writer must round-trip
			is.Equal(r.Revision, res.Revision)                          // Revision must be the commit's revision
			is.Equal(r.CreateRevision, res.Revision)                    // a new record's CreateRevision is its revision
			is.True(r.UpdatedAt.Equal(t0.Add(-time.Second)))            // UpdatedAt must be Op.Time
			is.True(r.ExpiresAt.Equal(t0.Add(1500 * time.Millisecond))) // ExpiresAt must be now + TTL, to the ms
			is.True(r.Live())                                           // a live record reports Live
		}},
		{"RevisionsIncreaseAndAreSharedByOneCommit", func(t *testing.T, e driverEnv) {
			is := is.New(t)
			r1 := e.put(t, t0, putOp("a", "1", 0), putOp("b", "1", 0))
			a, _ := e.get(t, t0, "a")
			b, _ := e.get(t, t0, "b")
			is.Equal(a.Revision, r1.Revision) // every write of a commit shares its revision
			is.Equal(b.Revision, r1.Revision) // every write of a commit shares its revision
			r2 := e.put(t, t0, putOp("a", "2", 0))
			is.True(r2.Revision > r1.Revision) // revisions must strictly increase
			r3 := e.commit(t, t0, &backend.Txn{Then: []backend.Op{{Kind: backend.OpDelete, Key: "b"}}})
			is.True(r3.Revision > r2.Revision) // a delete is a write and gets a new revision
		}},
		{"CreateRevisionIsKeptWhileLive", func(t *testing.T, e driverEnv) {
			is := is.New(t)
			r1 := e.put(t, t0, putOp("k", "1", time.Second))
			e.put(t, t0, putOp("k", "2", time.Second))
			k, _ := e.get(t, t0, "k")
			is.Equal(k.CreateRevision, r1.Revision) // a Put on a live key keeps CreateRevision
			r3 := e.put(t, t0.Add(time.Second), putOp("k", "3", 0))
			k, _ = e.get(t, t0.Add(time.Second), "k")
			is.Equal(k.CreateRevision, r3.Revision) // a Put on an expired key starts a new CreateRevision
			e.commit(t, t0, &backend.Txn{Then: []backend.Op{{Kind: backend.OpDelete, Key: "k"}}})
			r5 := e.put(t, t0, putOp("k", "4", 0))
			k, _ = e.get(t, t0, "k")
			is.Equal(k.CreateRevision, r5.Revision) // a Put after a Delete starts a new CreateRevision
		}},
		{"ExpiryIsExclusiveAtTheBoundary", func(t *testing.T, e driverEnv) {
			is := is.New(t)
			e.put(t, t0, putOp("k", "v", 10*time.Second))
			before, at := t0.Add(10*time.Second-time.Millisecond), t0.Add(10*time.Second)
			_, ok := e.get(t, before, "k")
			is.True(ok) // a record is live 1ms before its expiry
			_, ok = e.get(t, at, "k")
			is.True(!ok)                                                       // a record whose ExpiresAt equals now is expired
			is.Equal(e.list(t, backend.ListQuery{Now: before}), []string{"k"}) // List must show a live record
			is.Equal(e.list(t, backend.ListQuery{Now: at}), []string{})        // List must skip an expired record
			is.Equal(e.count(t, at, "").Prefixes[0], int64(0))                 // Count must skip an expired record
			res := e.commit(t, at, &backend.Txn{If: []backend.Cond{{Key: "k"}}})
			is.True(res.Committed) // Cond{Revision: 0} holds for an expired key
			recs, err := e.d.GetMany(context.Background(), &backend.GetQuery{NS: e.ns, Keys: []string{"k"}, Now: at})
			is.NoErr(err)
			is.True(!recs[0].Found()) // GetMany must hide an expired record unless asked
			recs, err = e.d.GetMany(context.Background(), &backend.GetQuery{NS: e.ns, Keys: []string{"k"}, Now: at, IncludeExpired: true})
			is.NoErr(err)
			is.True(recs[0].Found() && recs[0].Expired && !recs[0].Live()) // IncludeExpired must return the expired record flagged Expired
		}},
		{"CommitIsAllOrNothing", func(t *testing.T, e driverEnv) {
			is := is.New(t)
			base := e.put(t, t0, putOp("a", "1", 0))
			evBefore := e.count(t, t0).Events
			res := e.commit(t, t0, &backend.Txn{
				If:     []backend.Cond{{Key: "a", Revision: base.Revision}, {Key: "a", Revision: base.Revision + 100}},
				Then:   []backend.Op{putOp("b", "1", 0), {Kind: backend.OpDelete, Key: "a"}},
				Events: []backend.Event{{Key: "b", Op: "test"}},
			})
			is.True(!res.Committed)              // a Commit with a failed Cond must not commit
			is.Equal(res.Failed, 1)              // Result.Failed must name the first failed Cond
			is.Equal(res.Current, base.Revision) // Result.Current must give the failed key's live revision
			_, ok := e.get(t, t0, "b")
			is.True(!ok) // Commit must apply no Op when any Cond fails
			_, ok = e.get(t, t0, "a")
			is.True(ok)                               // Commit must apply no Op when any Cond fails
			is.Equal(e.count(t, t0).Events, evBefore) // Commit must append no Event when any Cond fails
			res = e.commit(t, t0, &backend.Txn{If: []backend.Cond{{Key: "missing", Revision: 7}}})
			is.True(!res.Committed)         // a Cond on an absent key with a revision fails
			is.Equal(res.Current, int64(0)) // Current is 0 for an absent key
			is.Equal(res.Failed, 0)
		}},
		{"CondZeroMeansAbsentOrExpired", func(t *testing.T, e driverEnv) {
			is := is.New(t)
			res := e.commit(t, t0, &backend.Txn{If: []backend.Cond{{Key: "k"}}, Then: []backend.Op{putOp("k", "1", time.Second)}})
			is.True(res.Committed) // Cond{Revision: 0} holds for an absent key
			res = e.commit(t, t0, &backend.Txn{If: []backend.Cond{{Key: "k"}}, Then: []backend.Op{putOp("k", "2", 0)}})
			is.True(!res.Committed) // Cond{Revision: 0} fails for a live key
			res = e.commit(t, t0.Add(time.Second), &backend.Txn{If: []backend.Cond{{Key: "k"}}, Then: []backend.Op{putOp("k", "3", 0)}})
			is.True(res.Committed) // Cond{Revision: 0} holds for an expired key
		}},
		{"AddKeepsACounter", func(t *testing.T, e driverEnv) {
			is := is.New(t)
			add := func(key, delta string, ttl time.Duration) backend.Op {
				return backend.Op{Kind: backend.OpAdd, Key: key, Value: []byte(delta), Writer: "w", TTL: ttl, Time: t0}
			}
			r1 := e.put(t, t0, add("n", "3", 0))
			c, ok := e.get(t, t0, "n")
			is.True(ok)                             // OpAdd on an absent key creates the record
			is.Equal(string(c.Value), "3")          // OpAdd on an absent key stores the delta
			is.Equal(c.CreateRevision, r1.Revision) // OpAdd creates like a put
			r2 := e.put(t, t0, add("n", "-5", 0), add("n", "1", 0))
			c, _ = e.get(t, t0, "n")
			is.Equal(string(c.Value), "-1")         // OpAdd adds to the stored integer, in order within a commit
			is.Equal(c.Revision, r2.Revision)       // OpAdd writes at the commit's revision
			is.Equal(c.CreateRevision, r1.Revision) // OpAdd on a live record keeps CreateRevision
			is.Equal(c.Writer, "w")
			e.put(t, t0, add("x", "7", time.Second))
			e.put(t, t0.Add(time.Second), add("x", "2", 0))
			c, _ = e.get(t, t0.Add(time.Second), "x")
			is.Equal(string(c.Value), "2") // OpAdd counts an expired record as 0
			is.True(c.ExpiresAt.IsZero())  // OpAdd sets the TTL like a put
			base := e.put(t, t0, putOp("c", "10", 0))
			res := e.commit(t, t0, &backend.Txn{If: []backend.Cond{{Key: "c", Revision: base.Revision}},
				Then: []backend.Op{add("c", "5", 0)}})
			is.True(res.Committed)
			res = e.commit(t, t0, &backend.Txn{If: []backend.Cond{{Key: "c", Revision: base.Revision}},
				Then: []backend.Op{add("c", "5", 0)}})
			is.True(!res.Committed) // OpAdd obeys the commit's conditions
			c, _ = e.get(t, t0, "c")
			is.Equal(string(c.Value), "15") // a failed commit adds nothing
		}},
		{"DeleteOfAbsentKeyIsNoError", func(t *testing.T, e driverEnv) {
			is := is.New(t)
			res := e.commit(t, t0, &backend.Txn{Then: []backend.Op{{Kind: backend.OpDelete, Key: "nope"}}})
			is.True(res.Committed) // deleting an absent key is not an error
		}},
		{"ListIsLiteralOrderedAndPaged", func(t *testing.T, e driverEnv) {
			is := is.New(t)
			keys := []string{"a", "a%", "a%b", "a_b", "ab", "a*c", "a?d", "a[e]", `a\f`, "A%", "b", "aé", "a\x7f", "a/", "a/b", "`"}
			var ops []backend.Op
			for _, k := range keys {
				ops = append(ops, putOp(k, "v:"+k, 0))
			}
			e.put(t, t0, ops...)
			e.put(t, t0, putOp("a%gone", "x", time.Second))
			now := t0.Add(time.Second)
			want := slices.Clone(keys)
			slices.Sort(want)
			is.Equal(e.list(t, backend.ListQuery{Now: now}), want)                                // List with an empty prefix returns every live key in byte order
			is.Equal(e.list(t, backend.ListQuery{Prefix: "a%", Now: now}), []string{"a%", "a%b"}) // '%' in a prefix is literal
			is.Equal(e.list(t, backend.ListQuery{Prefix: "a_", Now: now}), []string{"a_b"})       // '_' in a prefix is literal
			is.Equal(e.list(t, backend.ListQuery{Prefix: "a*", Now: now}), []string{"a*c"})       // '*' in a prefix is literal
			is.Equal(e.list(t, backend.ListQuery{Prefix: "a?", Now: now}), []string{"a?d"})       // '?' in a prefix is literal
			is.Equal(e.list(t, backend.ListQuery{Prefix: "a[", Now: now}), []string{"a[e]"})      // '[' in a prefix is literal
			is.Equal(e.list(t, backend.ListQuery{Prefix: `a\`, Now: now}), []string{`a\f`})       // '\' in a prefix is literal
			is.Equal(e.list(t, backend.ListQuery{Prefix: "A", Now: now}), []string{"A%"})         // prefixes are case-sensitive
			is.Equal(e.list(t, backend.ListQuery{Prefix: "a/", Now: now}), []string{"a/", "a/b"})
			var aKeys []string
			for _, k := range want {
				if len(k) > 0 && k[0] == 'a' {
					aKeys = append(aKeys, k)
				}
			}
			var paged []string
			after := ""
			for {
				page := e.list(t, backend.ListQuery{Prefix: "a", After: after, Limit: 3, Now: now})
				is.True(len(page) <= 3) // List must return at most Limit records
				paged = append(paged, page...)
				if len(page) < 3 {
					break
				}
				after = page[len(page)-1]
			}
			is.Equal(paged, aKeys) // paging with After visits every key once, in order
			recs, err := e.d.List(context.Background(), &backend.ListQuery{NS: e.ns, Prefix: "a%", Limit: 10, Now: now})
			is.NoErr(err)
			is.Equal(string(recs[0].Value), "v:a%") // List returns values unless KeysOnly
			is.Equal(recs[0].Revision > 0, true)
		}},
		{"KeysOnlyListingFollowsExpiryChanges", func(t *testing.T, e driverEnv) {
			is := is.New(t)
			e.put(t, t0, putOp("e/kept", "1", time.Second), putOp("e/lost", "1", 0))
			e.put(t, t0, putOp("e/kept", "2", 0), putOp("e/lost", "2", time.Second)) // the first loses its expiry, the second gains one
			later := t0.Add(2 * time.Second)
			for _, keysOnly := range []bool{true, false} {
				is.Equal(e.list(t, backend.ListQuery{Prefix: "e/", Now: later, KeysOnly: keysOnly}), []string{"e/kept"}) // a record that lost its expiry stays, one that gained one goes
			}
			is.Equal(e.count(t, later, "e/").Prefixes, []int64{1}) // Count agrees with List
		}},
		{"GetManyKeepsOrder", func(t *testing.T, e driverEnv) {
			is := is.New(t)
			e.put(t, t0, putOp("x", "1", 0), putOp("y", "2", 0))
			recs, err := e.d.GetMany(context.Background(), &backend.GetQuery{NS: e.ns, Keys: []string{"y", "nope", "x"}, Now: t0})
			is.NoErr(err)
			is.Equal(len(recs), 3)               // GetMany returns one record per key
			is.Equal(string(recs[0].Value), "2") // GetMany keeps the order of the keys
			is.Equal(recs[1].Key, "nope")        // an absent key gives a Record with its Key
			is.True(!recs[1].Found())            // an absent key gives Revision 0
			is.Equal(string(recs[2].Value), "1") // GetMany keeps the order of the keys
		}},
		{"CountCountsLiveRecordsPerPrefix", func(t *testing.T, e driverEnv) {
			is := is.New(t)
			e.commit(t, t0, &backend.Txn{
				Then:   []backend.Op{putOp("k/a", "", 0), putOp("k/b", "", time.Second), putOp("k/c", "", 0), putOp("l/a", "", 0)},
				Events: []backend.Event{{Key: "a", Op: "x"}, {Key: "b", Op: "x"}},
			})
			c := e.count(t, t0.Add(time.Second), "k/", "l/", "m/", "")
			is.Equal(c.Prefixes, []int64{2, 1, 0, 3}) // Count counts live records under each prefix
			is.Equal(c.Events, int64(2))              // Count counts the namespace's events
		}},
		{"HistoryIsNewestFirst", func(t *testing.T, e driverEnv) {
			is := is.New(t)
			r1 := e.commit(t, t0, &backend.Txn{Then: []backend.Op{putOp("k/a", `"1"`, 0)},
				Events: []backend.Event{{Key: "a", Op: "set", Value: []byte(`"1"`), PrevOf: "k/a", Writer: "w1"}}})
			r2 := e.commit(t, t0.Add(time.Second), &backend.Txn{Then: []backend.Op{putOp("k/a", `"2"`, 0)},
				Events: []backend.Event{{Key: "a", Op: "set", Value: []byte(`"2"`), PrevOf: "k/a"}, {Key: "b", Op: "other", Time: t0.Add(-time.Hour)}}})
			all := e.history(t, backend.HistoryQuery{})
			is.Equal(len(all), 3)
			is.True(all[0].ID > all[1].ID && all[1].ID > all[2].ID) // History is newest first with increasing IDs
			is.Equal(all[2].Revision, r1.Revision)                  // an event carries its commit's revision
			is.Equal(all[0].Revision, r2.Revision)                  // an event carries its commit's revision
			is.Equal(all[2].Prev, []byte(nil))                      // PrevOf of an absent key leaves Prev nil
			is.Equal(string(all[1].Prev), `"1"`)                    // PrevOf fills Prev with the value before the commit
			is.Equal(all[2].Writer, "w1")                           // Writer round-trips
			is.True(all[1].Time.Equal(t0.Add(time.Second)))         // a zero event Time becomes the commit's now
			is.True(all[0].Time.Equal(t0.Add(-time.Hour)))          // a given event Time is kept
			is.Equal(all[0].PrevOf, "")                             // PrevOf is not stored
			keyA := e.history(t, backend.HistoryQuery{Key: "a"})
			is.Equal(len(keyA), 2) // History filters by key
			is.Equal(string(keyA[0].Value), `"2"`)
			older := e.history(t, backend.HistoryQuery{Before: all[0].ID, Limit: 1})
			is.Equal(len(older), 1)          // History honours Limit
			is.Equal(older[0].ID, all[1].ID) // History honours Before
		}},
		{"HistoryOfOneKeyPagesBackAndForgetsTrimmedEntries", func(t *testing.T, e driverEnv) {
			is := is.New(t)
			var ids []int64 // of key a, oldest first
			for i := range 12 {
				key := "b"
				if i%3 == 0 {
					key = "a"
				}
				e.commit(t, t0, &backend.Txn{Events: []backend.Event{{Key: key, Op: "op", Value: []byte(strconv.Itoa(i))}}})
				if key == "a" {
					ids = append(ids, e.history(t, backend.HistoryQuery{Limit: 1})[0].ID)
				}
			}
			got := e.history(t, backend.HistoryQuery{Key: "a", Before: ids[3], Limit: 2})
			is.Equal(len(got), 2)                                            // History of a key honours Before and Limit
			is.Equal([]int64{got[0].ID, got[1].ID}, []int64{ids[2], ids[1]}) // newest first, skipping other keys
			is.Equal(string(got[1].Value), "3")
			sw, ok := e.d.(backend.Sweeper)
			if !ok {
				return
			}
			_, err := sw.Sweep(context.Background(), &backend.SweepQuery{Now: t0, Limit: 100, HistoryMaxEvents: 8})
			is.NoErr(err)
			got = e.history(t, backend.HistoryQuery{Key: "a"})
			is.Equal(len(got), 2) // the 4 oldest entries are trimmed, 2 of them of key a
			is.Equal(got[1].ID, ids[2])
			is.Equal(len(e.history(t, backend.HistoryQuery{Key: "a", Before: ids[2]})), 0) // trimmed entries are gone from a key's history
		}},
		{"ExpiredPreviousValueIsNotCaptured", func(t *testing.T, e driverEnv) {
			is := is.New(t)
			e.put(t, t0, putOp("k", "old", time.Second))
			e.commit(t, t0.Add(time.Second), &backend.Txn{Then: []backend.Op{putOp("k", "new", 0)},
				Events: []backend.Event{{Key: "k", Op: "set", PrevOf: "k"}}})
			is.Equal(e.history(t, backend.HistoryQuery{})[0].Prev, []byte(nil)) // PrevOf captures only a live value
		}},
		{"ResetWipesOnlyItsNamespace", func(t *testing.T, e driverEnv) {
			is := is.New(t)
			other := driverEnv{d: e.d, ns: newNS()}
			e.commit(t, t0, &backend.Txn{Then: []backend.Op{putOp("k/1", "", 0), putOp("k/2", "", time.Second), putOp("i/x", "", 0)},
				Events: []backend.Event{{Key: "1", Op: "x"}}})
			other.commit(t, t0, &backend.Txn{Then: []backend.Op{putOp("k/1", "", 0)}, Events: []backend.Event{{Key: "1", Op: "x"}}})
			before := e.put(t, t0, putOp("k/3", "", 0))
			evBefore := e.history(t, backend.HistoryQuery{})[0].ID
			res, err := e.d.Reset(context.Background(), &backend.ResetQuery{NS: e.ns, CountPrefixes: []string{"k/"}})
			is.NoErr(err)
			is.Equal(res.Records, int64(3))                               // Reset counts deleted records under CountPrefixes, expired included
			is.Equal(res.Events, int64(1))                                // Reset counts deleted events
			is.Equal(e.list(t, backend.ListQuery{}), []string{})          // Reset deletes every record of the namespace
			is.Equal(len(e.history(t, backend.HistoryQuery{})), 0)        // Reset deletes every event of the namespace
			is.Equal(other.list(t, backend.ListQuery{}), []string{"k/1"}) // Reset leaves other namespaces alone
			is.Equal(len(other.history(t, backend.HistoryQuery{})), 1)    // Reset leaves other namespaces alone
			after := e.commit(t, t0, &backend.Txn{Then: []backend.Op{putOp("k/1", "", 0)}, Events: []backend.Event{{Key: "1", Op: "x"}}})
			is.True(after.Revision > before.Revision)                      // revisions keep increasing after Reset
			is.True(e.history(t, backend.HistoryQuery{})[0].ID > evBefore) // event IDs keep increasing after Reset
		}},
		{"NamespacesAreIsolated", func(t *testing.T, e driverEnv) {
			is := is.New(t)
			other := driverEnv{d: e.d, ns: newNS()}
			e.put(t, t0, putOp("k", "mine", 0))
			r, _ := e.get(t, t0, "k")
			res := other.commit(t, t0, &backend.Txn{If: []backend.Cond{{Key: "k", Revision: r.Revision}}})
			is.True(!res.Committed)         // conditions see only the namespace's own records
			is.Equal(res.Current, int64(0)) // a key live in another namespace is absent in this one
			res = other.commit(t, t0, &backend.Txn{If: []backend.Cond{{Key: "k"}}, Then: []backend.Op{putOp("k", "theirs", 0)}})
			is.True(res.Committed) // Cond{Revision: 0} holds for a key only another namespace has
			r, _ = e.get(t, t0, "k")
			is.Equal(string(r.Value), "mine") // a namespace sees only its own records
		}},
		{"UpdaterRunsReadModifyWriteAtomically", func(t *testing.T, e driverEnv) {
			u, ok := e.d.(backend.Updater)
			if !ok {
				t.Skip("driver has no native Updater")
			}
			is := is.New(t)
			e.put(t, t0, putOp("k", "1", time.Second))
			now := t0.Add(time.Second)
			q := &backend.GetQuery{NS: e.ns, Keys: []string{"k", "nope"}, Now: now, IncludeExpired: true}
			res, err := u.Update(context.Background(), q, func(recs []backend.Record, n time.Time) (*backend.Txn, error) {
				is.True(n.Equal(now))     // Update passes the query's now
				is.True(recs[0].Expired)  // Update shows expired records when asked
				is.True(!recs[1].Found()) // Update reports absent keys
				return &backend.Txn{Then: []backend.Op{putOp("k", "2", 0)}}, nil
			})
			is.NoErr(err)
			is.True(res.Committed && res.Revision > 0) // Update commits what fn returns
			boom := errors.New("boom")
			_, err = u.Update(context.Background(), q, func([]backend.Record, time.Time) (*backend.Txn, error) {
				return &backend.Txn{Then: []backend.Op{putOp("k", "3", 0)}}, boom
			})
			is.Equal(err, boom) // Update returns fn's error unchanged
			r, _ := e.get(t, now, "k")
			is.Equal(string(r.Value), "2") // Update writes nothing when fn fails
			res, err = u.Update(context.Background(), q, func([]backend.Record, time.Time) (*backend.Txn, error) { return nil, nil })
			is.NoErr(err)
			is.True(res.Committed && res.Revision == 0) // a nil Txn commits nothing
		}},
		{"SweeperRemovesExpiredRecordsAndOldHistory", func(t *testing.T, e driverEnv) {
			sw, ok := e.d.(backend.Sweeper)
			if !ok {
				t.Skip("driver has no Sweeper")
			}
			is := is.New(t)
			for i := range 5 {
				e.commit(t, t0.Add(time.Duration(i)*time.Hour), &backend.Txn{Events: []backend.Event{{Key: "e", Op: strconv.Itoa(i)}}})
			}
			e.put(t, t0, putOp("gone", "", time.Second), putOp("graced", "", time.Hour+time.Second), putOp("kept", "", 0))
			now := t0.Add(2 * time.Hour)
			q := &backend.SweepQuery{Now: now, Grace: time.Hour, Limit: 1000, HistoryMaxEvents: 3}
			res, err := sw.Sweep(context.Background(), q)
			is.NoErr(err)
			recs, err := e.d.GetMany(context.Background(), &backend.GetQuery{NS: e.ns, Keys: []string{"gone", "graced", "kept"}, Now: now, IncludeExpired: true})
			is.NoErr(err)
			is.True(!recs[0].Found()) // Sweep removes records expired for longer than Grace
			is.True(recs[1].Found())  // Sweep keeps records expired for less than Grace
			is.True(recs[2].Found())  // Sweep keeps live records
			is.True(res.Records >= 1)
			evs := e.history(t, backend.HistoryQuery{Key: "e"})
			is.Equal(len(evs), 3)    // Sweep trims history to HistoryMaxEvents newest events
			is.Equal(evs[2].Op, "2") // Sweep trims the oldest events first
			_, err = sw.Sweep(context.Background(), &backend.SweepQuery{Now: t0.Add(4*time.Hour + time.Minute), Limit: 1000, HistoryMaxAge: time.Hour})
			is.NoErr(err)
			evs = e.history(t, backend.HistoryQuery{Key: "e"})
			is.Equal(len(evs), 1) // Sweep removes events older than HistoryMaxAge
			is.Equal(evs[0].Op, "4")
		}},
		{"SweeperHonoursItsLimit", func(t *testing.T, e driverEnv) {
			sw, ok := e.d.(backend.Sweeper)
			if !ok {
				t.Skip("driver has no Sweeper")
			}
			is := is.New(t)
			var ops []backend.Op
			for i := range 10 {
				ops = append(ops, putOp(fmt.Sprintf("k%d", i), "", time.Second))
			}
			e.put(t, t0, ops...)
			q := &backend.SweepQuery{Now: t0.Add(time.Minute), Limit: 4}
			var total int64
			for range 10 {
				res, err := sw.Sweep(context.Background(), q)
				is.NoErr(err)
				is.True(res.Records <= 4) // Sweep deletes at most Limit records per call
				total += res.Records
				if !res.More {
					break
				}
			}
			recs, err := e.d.GetMany(context.Background(), &backend.GetQuery{NS: e.ns, Keys: []string{"k0", "k9"}, Now: t0, IncludeExpired: true})
			is.NoErr(err)
			is.True(!recs[0].Found() && !recs[1].Found()) // repeated Sweeps remove every expired record
			is.True(total >= 10)
		}},
		{"ConcurrentConditionalIncrementsAreExact", func(t *testing.T, e driverEnv) {
			is := is.New(t)
			const workers, each = 32, 10
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			for range workers {
				wg.Go(func() {
					for n := 0; n < each; {
						r, err := e.d.Get(context.Background(), e.ns, "ctr", t0)
						cur, rev := 0, int64(0)
						if err == nil {
							cur, _ = strconv.Atoi(string(r.Value))
							rev = r.Revision
						} else if !errors.Is(err, backend.ErrNotFound) {
							errs <- err
							return
						}
						res, err := e.d.Commit(context.Background(), &backend.Txn{NS: e.ns, Now: t0,
							If: []backend.Cond{{Key: "ctr", Revision: rev}}, Then: []backend.Op{putOp("ctr", strconv.Itoa(cur+1), 0)}})
						if err != nil {
							errs <- err
							return
						}
						if res.Committed {
							n++
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				is.NoErr(err)
			}
			r, _ := e.get(t, t0, "ctr")
			is.Equal(string(r.Value), strconv.Itoa(workers*each)) // conditional increments by racing writers must not lose an update
		}},
		{"ConcurrentCreatesHaveOneWinner", func(t *testing.T, e driverEnv) {
			is := is.New(t)
			var wg sync.WaitGroup
			var mu sync.Mutex
			wins := 0
			for i := range 16 {
				wg.Go(func() {
					res, err := e.d.Commit(context.Background(), &backend.Txn{NS: e.ns, Now: t0,
						If: []backend.Cond{{Key: "lock"}}, Then: []backend.Op{putOp("lock", strconv.Itoa(i), 0)}})
					if err != nil {
						t.Error(err)
						return
					}
					if res.Committed {
						mu.Lock()
						wins++
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			is.Equal(wins, 1) // of racing commits conditioned on absence exactly one must win
		}},
	}
}
