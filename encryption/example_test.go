package encryption_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend/memstate"
	"github.com/statesidecar/state/encryption"
)

// A store that encrypts what it stores, with the data about one subject
// erased on request.
func Example() {
	ctx := context.Background()
	// In production: os.Getenv("STATE_ENCRYPTION_KEY_URL"), a KMS key.
	enc, err := encryption.Open(ctx, "base64key://AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")
	if err != nil {
		panic(err)
	}
	st, err := state.New(memstate.New(), &state.Options{Encryption: enc})
	if err != nil {
		panic(err)
	}
	defer st.Close()

	_, _ = st.Set(ctx, "user/42/profile", map[string]string{"name": "Ada"}, state.WithSubject("user-42"))
	_, _ = st.Set(ctx, "team/plan", "ship it")
	e, _ := st.Get(ctx, "user/42/profile")
	fmt.Println(string(e.Value))

	erased, _ := st.EraseSubject(state.WithPrincipal(ctx, "dpo@example.com"), "user-42")
	fmt.Println("records erased:", erased.Records, "keys destroyed:", erased.KeysDestroyed)
	_, err = st.Get(ctx, "user/42/profile")
	fmt.Println(errors.Is(err, state.ErrNotFound))
	e, _ = st.Get(ctx, "team/plan")
	fmt.Println(string(e.Value))
	h, _ := st.History(ctx, state.HistoryQuery{Limit: 1})
	fmt.Println(h[0].Op, h[0].Key, h[0].Principal, string(h[0].Value))
	// Output:
	// {"name":"Ada"}
	// records erased: 1 keys destroyed: true
	// true
	// "ship it"
	// erase.subject user-42 dpo@example.com {"records":1,"events":1,"keys_destroyed":true}
}
