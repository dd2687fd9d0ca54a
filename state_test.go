package state_test

// The semantics of Store are tested on every backend by backend/backendtest
// (see backend/memstate for the memory run). This file tests what belongs
// to the root package alone: URLs, observers, the server clock.

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/backend/memstate"
	"github.com/statesidecar/state/statetest"
)

func TestOpenUnknownSchemeListsTheRegisteredOnes(t *testing.T) {
	is := is.New(t)
	_, err := state.Open(context.Background(), "nosuch://x")
	is.True(err != nil)
	is.True(strings.Contains(err.Error(), `unknown URL scheme "nosuch"`)) // the error names the scheme
	is.True(strings.Contains(err.Error(), "mem"))                         // and lists the registered ones
	is.True(strings.Contains(err.Error(), "forgotten import?"))
}

// A bare file name, the usual slip, gets the URL forms explained.
func TestOpenBarePathExplainsURLs(t *testing.T) {
	is := is.New(t)
	for _, p := range []string{"state.db", "/var/lib/app/state.db", ""} {
		_, err := state.Open(context.Background(), p)
		is.True(err != nil)
		is.True(errors.Is(err, state.ErrInvalid))                   // a bad argument
		is.True(strings.Contains(err.Error(), "sqlite:state.db"))   // the relative form
		is.True(strings.Contains(err.Error(), "sqlite:///var/lib")) // and the absolute one
	}
}

func TestOpenMemNamesShareAStoreAndNamespaceParameterApplies(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	a, err := state.Open(ctx, "mem://shared?namespace=tenant-1")
	is.NoErr(err)
	defer a.Close()
	b, err := state.Open(ctx, "mem://shared?namespace=tenant-1")
	is.NoErr(err)
	defer b.Close()
	is.Equal(a.NamespaceName(), "tenant-1") // the namespace parameter selects the namespace
	_, err = a.Set(ctx, "k", 1)
	is.NoErr(err)
	ok, err := b.Exists(ctx, "k")
	is.NoErr(err)
	is.True(ok) // the same mem:// name is the same store
	_, err = state.Open(ctx, "mem://x?bogus=1")
	is.True(err != nil) // unknown parameters are rejected
	_, err = state.Open(ctx, "mem://x?namespace=bad!name")
	is.True(errors.Is(err, state.ErrInvalid)) // a bad namespace is rejected
}

func TestRegisterTwicePanics(t *testing.T) {
	is := is.New(t)
	var m state.URLMux
	m.Register("x", new(memstate.URLOpener))
	defer func() { is.True(recover() != nil) }() // a duplicate scheme is a programmer error
	m.Register("x", new(memstate.URLOpener))
}

func TestObserverSeesEveryBackendCall(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	var mu sync.Mutex
	calls := map[string]int{}
	st, err := state.New(memstate.New(), &state.Options{SweepInterval: -1, Observer: func(call string, took time.Duration, err error) {
		mu.Lock()
		defer mu.Unlock()
		calls[call]++
	}})
	is.NoErr(err)
	defer st.Close()
	_, _ = st.Set(ctx, "k", 1)
	_, _ = st.Get(ctx, "k")
	_, _ = st.Delete(ctx, "k")
	_, _ = st.Health(ctx)
	_, _ = st.Sweep(ctx)
	mu.Lock()
	defer mu.Unlock()
	is.Equal(calls, map[string]int{"commit": 1, "get": 1, "update": 1, "count": 1, "get_many": 1, "sweep": 1}) // one observation per backend call
}

// serverClockDriver is a memory backend that claims to be shared, with a
// server clock an hour ahead of the process.
type serverClockDriver struct {
	*memstate.Driver
	mu   sync.Mutex
	asks int
}

func (d *serverClockDriver) ServerTime(context.Context) (time.Time, error) {
	d.mu.Lock()
	d.asks++
	d.mu.Unlock()
	return time.Now().Add(time.Hour), nil
}

// zeroNowDriver records whether the store handed it a time.
type zeroNowDriver struct {
	*serverClockDriver
	mu       sync.Mutex
	gotZero  bool
	gotGiven bool
}

func (d *zeroNowDriver) Commit(ctx context.Context, txn *backend.Txn) (backend.Result, error) {
	d.mu.Lock()
	if txn.Now.IsZero() {
		d.gotZero = true
	} else {
		d.gotGiven = true
	}
	d.mu.Unlock()
	return d.serverClockDriver.Commit(ctx, txn)
}

func TestSharedBackendDecidesExpiryWithItsOwnClock(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	d := &zeroNowDriver{serverClockDriver: &serverClockDriver{Driver: memstate.New()}}
	st, err := state.New(d, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		e, err := st.Set(ctx, "k", 1)
		is.NoErr(err)
		if e.UpdatedAt.After(time.Now().Add(50 * time.Minute)) {
			break // the store's stamps follow the server's clock
		}
		is.True(time.Now().Before(deadline)) // the store must read the server's clock soon after New
		time.Sleep(time.Millisecond)         // waiting for the background clock sync
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	is.True(d.gotZero && !d.gotGiven) // without an injected clock, the driver decides "now"

	clk := statetest.NewClock()
	d2 := &zeroNowDriver{serverClockDriver: &serverClockDriver{Driver: memstate.New()}}
	st2, err := state.New(d2, &state.Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	e, err := st2.Set(ctx, "k", 1)
	is.NoErr(err)
	is.True(e.UpdatedAt.Equal(statetest.Epoch)) // an injected clock wins
	d2.mu.Lock()
	defer d2.mu.Unlock()
	is.True(d2.gotGiven && !d2.gotZero) // and is handed to the driver
}

func TestHealthReportsVersionAndBackend(t *testing.T) {
	is := is.New(t)
	st, _ := statetest.NewStore(t)
	h, err := st.Health(context.Background())
	is.NoErr(err)
	is.True(h.OK())
	is.Equal(h.Backend, "memory")
	is.Equal(h.Version, state.Version)
	is.Equal(h.Namespace, state.DefaultNamespace)
}

func TestPingAnswersUntilClosed(t *testing.T) {
	is := is.New(t)
	st, err := state.New(memstate.New(), &state.Options{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	is.NoErr(st.Ping(context.Background())) // a reachable backend answers
	is.NoErr(st.Close())
	is.True(errors.Is(st.Ping(context.Background()), state.ErrClosed)) // a closed store does not
}

func TestBackgroundSweeperRemovesExpiredRecords(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	clk := statetest.NewClock()
	d := memstate.New()
	st, err := state.New(d, &state.Options{Clock: clk, SweepInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, err = st.Set(ctx, "gone", 1, state.WithTTL(time.Second))
	is.NoErr(err)
	_, err = st.Set(ctx, "kept", 1)
	is.NoErr(err)
	clk.Advance(time.Second + state.DefaultSweepGrace)
	q := &backend.GetQuery{NS: st.NamespaceName(), Keys: []string{"k/gone", "k/kept"}, Now: clk.Now(), IncludeExpired: true}
	deadline := time.Now().Add(30 * time.Second)
	for {
		recs, err := d.GetMany(ctx, q)
		is.NoErr(err)
		is.True(recs[1].Found()) // the sweeper leaves live records alone
		if !recs[0].Found() {
			break // removed in the background, without a Sweep call
		}
		is.True(time.Now().Before(deadline)) // the background sweeper must run every SweepInterval
		time.Sleep(time.Millisecond)         // waiting for the background goroutine's effect
	}
}

// closeCounter counts Close calls on the driver it wraps.
type closeCounter struct {
	backend.Driver
	closed int
}

func (c *closeCounter) Close() error { c.closed++; return c.Driver.Close() }

type closeCountingOpener struct{ d *closeCounter }

func (o closeCountingOpener) OpenDriverURL(context.Context, *url.URL) (backend.Driver, error) {
	return o.d, nil
}

func TestNewAndOpenReturnErrorsForBadInput(t *testing.T) {
	is := is.New(t)
	_, err := state.New(nil, nil)
	is.True(errors.Is(err, state.ErrInvalid)) // a nil driver is an error, not a panic
	d := memstate.New()
	defer d.Close()
	_, err = state.New(d, &state.Options{Namespace: "no spaces"})
	var fe *state.FieldError
	is.True(errors.As(err, &fe))
	is.Equal(fe.Field, "namespace") // a bad namespace is an error naming the field

	var m state.URLMux
	cc := &closeCounter{Driver: memstate.New()}
	m.Register("cc", closeCountingOpener{cc})
	_, err = m.Open(context.Background(), "cc://", &state.Options{Namespace: "bad/ns"})
	is.True(errors.Is(err, state.ErrInvalid)) // Open reports the bad namespace of its options
	is.Equal(cc.closed, 1)                    // and closes the driver it opened
}

func TestNewRejectsAClaimTTLNoBackendCanStore(t *testing.T) {
	d := memstate.New()
	defer d.Close()
	for _, ttl := range []time.Duration{time.Microsecond, 200 * 365 * 24 * time.Hour} {
		_, err := state.New(d, &state.Options{ClaimTTL: ttl})
		var fe *state.FieldError
		if !errors.As(err, &fe) || fe.Field != "Options.ClaimTTL" {
			t.Errorf("ClaimTTL %v: want a *FieldError naming Options.ClaimTTL, got %v", ttl, err)
		}
	}
	st, err := state.New(d, &state.Options{ClaimTTL: 1500 * time.Microsecond, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if st.ClaimTTL() != 2*time.Millisecond {
		t.Errorf("a ClaimTTL that is not a whole number of milliseconds is rounded up: got %v", st.ClaimTTL())
	}
}
