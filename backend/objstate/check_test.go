package objstate

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/statesidecar/state/backend"
)

// gateMedium is a Medium in memory whose conditional reads (the read
// checks) can be held until released.
type gateMedium struct {
	mu      sync.Mutex
	objs    map[string]Object
	hold    chan struct{} // while not nil, conditional reads wait for it to close
	checks  int           // conditional reads answered
	holding chan struct{} // receives when a conditional read starts waiting
}

func (m *gateMedium) Name() string { return "gate" }

func (m *gateMedium) Read(ctx context.Context, key, ifNoneMatch string) (Object, error) {
	m.mu.Lock()
	hold := m.hold
	m.mu.Unlock()
	if ifNoneMatch != "" && hold != nil {
		select {
		case m.holding <- struct{}{}:
		default:
		}
		select {
		case <-hold:
		case <-ctx.Done():
			return Object{}, ctx.Err()
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if ifNoneMatch != "" {
		m.checks++
	}
	o, ok := m.objs[key]
	if !ok {
		return Object{}, ErrNotExist
	}
	if ifNoneMatch != "" && o.Tag == ifNoneMatch {
		return Object{}, ErrUnchanged
	}
	return o, nil
}

func (m *gateMedium) Write(ctx context.Context, key string, data []byte, c Cond) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.objs[key]
	if (c.IfAbsent && ok) || (c.IfMatch != "" && (!ok || cur.Tag != c.IfMatch)) {
		return "", ErrConditionFailed
	}
	sum := md5.Sum(data)
	tag := `"` + hex.EncodeToString(sum[:]) + `"`
	m.objs[key] = Object{Data: append([]byte(nil), data...), Tag: tag}
	return tag, nil
}

func (m *gateMedium) Delete(ctx context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.objs, key)
	return nil
}

func (m *gateMedium) List(ctx context.Context, prefix string, fn func(ObjectInfo) bool) error {
	m.mu.Lock()
	var infos []ObjectInfo
	for k, o := range m.objs {
		if strings.HasPrefix(k, prefix) {
			infos = append(infos, ObjectInfo{Key: k, Size: int64(len(o.Data))})
		}
	}
	m.mu.Unlock()
	for _, i := range infos {
		if !fn(i) {
			break
		}
	}
	return nil
}

func (m *gateMedium) Now() time.Time { return time.Now() }
func (m *gateMedium) Close() error   { return nil }

// TestReadsWaitingShareOneCheck holds a read check in flight while twenty
// more reads arrive, then lets it go: the twenty are served by one check
// that starts after them, so two checks serve twenty-one reads, and every
// read sees the write made before it.
func TestReadsWaitingShareOneCheck(t *testing.T) {
	m := &gateMedium{objs: map[string]Object{}, holding: make(chan struct{}, 1)}
	d, err := New(m, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := d.Commit(ctx, &backend.Txn{NS: "ns", Then: []backend.Op{{Kind: backend.OpPut, Key: "k", Value: []byte(`1`)}}})
	if err != nil || !res.Committed {
		t.Fatalf("commit: %+v, %v", res, err)
	}
	hold := make(chan struct{})
	m.mu.Lock()
	m.hold = hold
	m.mu.Unlock()

	const waiting = 20
	errs := make(chan error, waiting+1)
	read := func() {
		r, err := d.Get(ctx, "ns", "k", time.Time{})
		if err == nil && string(r.Value) != "1" {
			err = fmt.Errorf("read %s, want 1", r.Value)
		}
		errs <- err
	}
	go read()
	<-m.holding // the first read's check is in flight
	s, err := d.space(ctx, "ns")
	if err != nil {
		t.Fatal(err)
	}
	for range waiting {
		go read()
	}
	// Wait for the twenty to join the next check (polling the driver's
	// state, not sleeping in place of it).
	for joined := 0; joined < waiting; {
		s.lock()
		if s.waiting != nil {
			joined = s.waiting.readers
		}
		s.unlock()
		if ctx.Err() != nil {
			t.Fatalf("only %d reads joined the next check", joined)
		}
		time.Sleep(time.Millisecond)
	}
	m.mu.Lock()
	m.hold = nil
	m.mu.Unlock()
	close(hold)
	for range waiting + 1 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.checks != 2 {
		t.Fatalf("%d read checks served %d reads, want 2", m.checks, waiting+1)
	}
}
