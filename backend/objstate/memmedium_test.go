package objstate_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/statesidecar/state/backend/objstate"
)

// memMedium is a Medium in memory for the driver's own tests, shared by
// every driver opened on it (standing for processes sharing a bucket). It
// can inject the faults of a real object store: writes that fail with a
// transient error before or after they took effect, and conflicts.
type memMedium struct {
	mu   sync.Mutex
	objs map[string]memObj
	tags int64
	// faultRate is the probability that a request fails transiently
	// (half of the failed writes take effect anyway).
	faultRate float64
	reads     atomic.Int64
	writes    atomic.Int64
}

type memObj struct {
	data []byte
	tag  string
	mod  time.Time
}

func newMemMedium() *memMedium { return &memMedium{objs: map[string]memObj{}} }

// handle returns a Medium on m that Close does not close.
func (m *memMedium) handle() objstate.Medium { return memHandle{m} }

type memHandle struct{ *memMedium }

func (memHandle) Close() error { return nil }

func (m *memMedium) Name() string { return "memory-objects" }

func (m *memMedium) fault() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.faultRate > 0 && rand.Float64() < m.faultRate
}

func (m *memMedium) Read(ctx context.Context, key, ifNoneMatch string) (objstate.Object, error) {
	if err := ctx.Err(); err != nil {
		return objstate.Object{}, err
	}
	m.reads.Add(1)
	if m.fault() {
		return objstate.Object{}, fmt.Errorf("%w: injected read fault", objstate.ErrTransient)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.objs[key]
	switch {
	case !ok:
		return objstate.Object{}, objstate.ErrNotExist
	case ifNoneMatch != "" && o.tag == ifNoneMatch:
		return objstate.Object{}, objstate.ErrUnchanged
	}
	return objstate.Object{Data: slices.Clone(o.data), Tag: o.tag}, nil
}

func (m *memMedium) Write(ctx context.Context, key string, data []byte, c objstate.Cond) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	m.writes.Add(1)
	fault := m.fault()
	if fault && rand.IntN(2) == 0 {
		return "", fmt.Errorf("%w: injected write fault (not written)", objstate.ErrTransient)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.objs[key]
	switch {
	case c.IfAbsent && ok, c.IfMatch != "" && (!ok || o.tag != c.IfMatch):
		if fault {
			return "", fmt.Errorf("%w: injected conflict", objstate.ErrTransient)
		}
		return "", objstate.ErrConditionFailed
	}
	m.tags++
	tag := fmt.Sprintf("t%d", m.tags)
	m.objs[key] = memObj{data: slices.Clone(data), tag: tag, mod: time.Now()}
	if fault {
		return "", fmt.Errorf("%w: injected write fault (written)", objstate.ErrTransient)
	}
	return tag, nil
}

func (m *memMedium) Delete(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.objs, key)
	return nil
}

func (m *memMedium) List(ctx context.Context, prefix string, fn func(objstate.ObjectInfo) bool) error {
	m.mu.Lock()
	var infos []objstate.ObjectInfo
	for k, o := range m.objs {
		if strings.HasPrefix(k, prefix) {
			infos = append(infos, objstate.ObjectInfo{Key: k, Modified: o.mod, Size: int64(len(o.data))})
		}
	}
	m.mu.Unlock()
	slices.SortFunc(infos, func(a, b objstate.ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	for _, i := range infos {
		if !fn(i) {
			break
		}
	}
	return ctx.Err()
}

func (m *memMedium) Now() time.Time { return time.Now() }

func (m *memMedium) Close() error { return nil }

// keys returns the keys stored under prefix.
func (m *memMedium) keys(prefix string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for k := range m.objs {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
