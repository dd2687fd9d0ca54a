package genkit_test

import (
	"errors"
	"testing"
	"time"

	"github.com/firebase/genkit/go/core/x/session"
	"github.com/matryer/is"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/adapters/genkit"
	"github.com/statesidecar/state/internal/storetest"
	"github.com/statesidecar/state/statetest"
)

type cart struct {
	Items []string `json:"items"`
	Total int      `json:"total"`
}

func TestSessionsAreSharedAndDurable(t *testing.T) {
	storetest.Run(t, func(t *testing.T, b storetest.Backend) {
		is := is.New(t)
		ctx := t.Context()
		store := genkit.NewSessionStore[cart](storetest.Open(t, b.URL, nil), nil)
		sess, err := session.New(ctx, session.WithStore[cart](store), session.WithID[cart]("s/1"),
			session.WithInitialState(cart{Items: []string{"tea"}, Total: 3}))
		is.NoErr(err)
		is.NoErr(sess.UpdateState(ctx, cart{Items: []string{"tea", "cake"}, Total: 7}))

		// Another handle, as another process or replica would have.
		other := genkit.NewSessionStore[cart](storetest.Open(t, b.URL, nil), nil)
		loaded, err := session.Load(ctx, other, "s/1")
		is.NoErr(err)
		is.Equal(loaded.ID(), "s/1")
		is.Equal(loaded.State(), cart{Items: []string{"tea", "cake"}, Total: 7}) // the latest state, from the store

		_, err = session.Load(ctx, other, "missing")
		var nf *session.NotFoundError
		is.True(errors.As(err, &nf)) // a missing session is Genkit's NotFoundError

		ok, err := other.Delete(ctx, "s/1")
		is.NoErr(err)
		is.True(ok)
		d, err := store.Get(ctx, "s/1")
		is.NoErr(err)
		is.True(d == nil) // deleted
	})
}

func TestSessionTTL(t *testing.T) {
	storetest.Run(t, func(t *testing.T, b storetest.Backend) {
		is := is.New(t)
		ctx := t.Context()
		clk := statetest.NewClock()
		store := genkit.NewSessionStore[cart](storetest.Open(t, b.URL, &state.Options{Clock: clk, SweepInterval: -1}),
			&genkit.Options{TTL: time.Hour, Prefix: "gk/"})
		is.NoErr(store.Save(ctx, "s", &session.Data[cart]{ID: "s", State: cart{Total: 1}}))
		clk.Advance(time.Hour - time.Millisecond)
		d, err := store.Get(ctx, "s")
		is.NoErr(err)
		is.Equal(d.State.Total, 1)
		clk.Advance(time.Millisecond)
		d, err = store.Get(ctx, "s")
		is.NoErr(err)
		is.True(d == nil) // a session expires TTL after its last save
	})
}

func TestBadInput(t *testing.T) {
	is := is.New(t)
	st := storetest.Open(t, storetest.New(t, "memory").URL, nil)
	store := genkit.NewSessionStore[any](st, nil)
	is.True(store.Save(t.Context(), "s", nil) != nil)                                                      // nil data
	is.True(store.Save(t.Context(), "s", &session.Data[any]{ID: "s", State: func() {}}) != nil)            // state that is not JSON
	is.True(store.Save(t.Context(), "", &session.Data[any]{ID: "", State: 1}) == nil)                      // the prefix makes an empty id a valid key
	is.True(errors.Is(store.Save(t.Context(), string([]byte{0}), &session.Data[any]{}), state.ErrInvalid)) // a NUL byte is not
}
