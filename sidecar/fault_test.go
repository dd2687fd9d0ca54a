package sidecar

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/backend/memstate"
)

// faultDriver is a memory backend whose reads can fail, wait for their
// context, or hang whatever their context says (a backend that ignores
// deadlines), on demand.
type faultDriver struct {
	*memstate.Driver
	down    atomic.Bool                   // Get fails, naming an address
	slow    atomic.Bool                   // Get waits for its context to end
	hang    atomic.Pointer[chan struct{}] // Get waits for the channel to close
	hanging atomic.Int64                  // Gets waiting in hang
}

var errFaultDown = errors.New("dial tcp 10.9.8.7:6379: connect: connection refused")

func (d *faultDriver) Get(ctx context.Context, ns, key string, now time.Time) (backend.Record, error) {
	switch {
	case d.down.Load():
		return backend.Record{}, errFaultDown
	case d.slow.Load():
		<-ctx.Done()
		return backend.Record{}, fmt.Errorf("fault: get %q: %w", key, ctx.Err())
	}
	if h := d.hang.Load(); h != nil {
		d.hanging.Add(1)
		<-*h
		d.hanging.Add(-1)
	}
	return d.Driver.Get(ctx, ns, key, now)
}

// hangGets makes Gets hang until the returned function is called.
func (d *faultDriver) hangGets() (release func()) {
	h := make(chan struct{})
	d.hang.Store(&h)
	return sync.OnceFunc(func() { d.hang.Store(nil); close(h) })
}

// faults hands the "fault://<name>" URL opener's drivers to tests.
var faults = struct {
	sync.Mutex
	m map[string]*faultDriver
}{m: map[string]*faultDriver{}}

var faultSeq atomic.Int64

type faultOpener struct{}

func (faultOpener) OpenDriverURL(_ context.Context, u *url.URL) (backend.Driver, error) {
	faults.Lock()
	defer faults.Unlock()
	return faults.m[u.Host], nil
}

func init() { state.Register("fault", faultOpener{}) }

// faultConfig is memConfig on a new faultDriver.
func faultConfig(t *testing.T) (Config, *faultDriver) {
	d := &faultDriver{Driver: memstate.New()}
	name := fmt.Sprintf("d%d", faultSeq.Add(1))
	faults.Lock()
	faults.m[name] = d
	faults.Unlock()
	t.Cleanup(func() { faults.Lock(); delete(faults.m, name); faults.Unlock() })
	c := memConfig()
	c.storeURL = "fault://" + name
	return c, d
}
