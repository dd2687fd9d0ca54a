package backendtest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/statesidecar/state"
)

// The linearizability check records what concurrent clients asked and were
// told, with when each call started and returned, and asks porcupine whether
// some order of the calls, consistent with real time, explains every answer
// by a single sequential key-value store. Racing writers that lose a write,
// reads that see the past, or compare-and-sets that both succeed make the
// history illegal.

type kvInput struct {
	op        string // get, set, cas, del
	key       string
	value     int
	ifVersion int64
}

type kvOutput struct {
	found   bool  // get: the key was live; del: a live key was deleted
	value   int   // get
	version int64 // get, set, cas: the version read or written
	ok      bool  // cas: written
	current int64 // cas conflict: the version named by the conflict
}

// kvState is one key: its live value and version, and the greatest version
// it ever had (new versions must exceed it).
type kvState struct {
	exists  bool
	value   int
	version int64
	last    int64
}

var kvModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		for _, op := range h {
			k := op.Input.(kvInput).key
			byKey[k] = append(byKey[k], op)
		}
		var out [][]porcupine.Operation
		for _, ops := range byKey {
			out = append(out, ops)
		}
		return out
	},
	Init: func() any { return kvState{} },
	Step: func(s, in, out any) (bool, any) {
		st, i, o := s.(kvState), in.(kvInput), out.(kvOutput)
		switch i.op {
		case "get":
			if !st.exists {
				return !o.found, st
			}
			return o.found && o.value == st.value && o.version == st.version, st
		case "set":
			return o.version > st.last, kvState{exists: true, value: i.value, version: o.version, last: o.version}
		case "cas":
			if i.ifVersion != st.version {
				return !o.ok && o.current == st.version, st
			}
			return o.ok && o.version > st.last, kvState{exists: true, value: i.value, version: o.version, last: o.version}
		case "del":
			return o.found == st.exists, kvState{last: st.last}
		}
		return false, st
	},
	DescribeOperation: func(in, out any) string { return fmt.Sprintf("%+v -> %+v", in, out) },
}

func linearizableCase(t *testing.T, e storeEnv) {
	const clients, opsEach = 8, 40
	keys := []string{"x", "y"}
	var rc race
	var mu sync.Mutex
	var history []porcupine.Operation
	rc.run(clients, func(c int) {
		rng := rand.New(rand.NewPCG(uint64(c), 42))
		var lastSeen int64
		for n := range opsEach {
			in := kvInput{key: keys[rng.IntN(len(keys))], value: c*1000 + n}
			var out kvOutput
			call := rc.now()
			var err error
			switch r := rng.IntN(10); {
			case r < 4:
				in.op = "get"
				var en state.Entry
				en, err = e.st.Get(ctx, in.key)
				if errors.Is(err, state.ErrNotFound) {
					err = nil
				} else if err == nil {
					out = kvOutput{found: true, version: en.Version}
					out.value, err = strconv.Atoi(string(en.Value))
					lastSeen = en.Version
				}
			case r < 6:
				in.op = "set"
				var en state.Entry
				en, err = e.st.Set(ctx, in.key, in.value)
				out.version = en.Version
			case r < 9:
				in.op, in.ifVersion = "cas", lastSeen
				var en state.Entry
				en, err = e.st.Set(ctx, in.key, in.value, state.IfVersion(lastSeen))
				var ce *state.ConflictError
				if errors.As(err, &ce) {
					out.current, err = ce.Current, nil
					lastSeen = ce.Current
				} else if err == nil {
					out.ok, out.version = true, en.Version
				}
			default:
				in.op = "del"
				out.found, err = e.st.Delete(ctx, in.key)
			}
			ret := rc.now()
			if err != nil {
				t.Errorf("%s %s: %v", in.op, in.key, err)
				return
			}
			mu.Lock()
			history = append(history, porcupine.Operation{ClientId: c, Input: in, Call: call, Output: out, Return: ret})
			mu.Unlock()
		}
	})
	checkOverlap(t, "key-value calls", spansOf(history))
	res, _ := porcupine.CheckOperationsVerbose(kvModel, history, time.Minute)
	if res != porcupine.Ok {
		t.Fatalf("the history of %d concurrent key-value operations is %s: no sequential store explains it", len(history), res)
	}
}

// spansOf returns the calls of a porcupine history as spans.
func spansOf(h []porcupine.Operation) []span {
	out := make([]span, len(h))
	for i, op := range h {
		out[i] = span{client: op.ClientId, call: op.Call, done: op.Return}
	}
	return out
}
