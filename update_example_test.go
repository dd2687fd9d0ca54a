package state_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/statesidecar/state"
)

// An atomic read-modify-write of two entries: append a message to a chat
// log kept as one entry per message plus a counter, refusing when the log
// was closed. Racing appenders never lose a message nor reuse a number.
func ExampleStore_Update() {
	ctx := context.Background()
	st, err := state.Open(ctx, "mem://")
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	errClosed := errors.New("chat is closed")
	appendMessage := func(text string) (int, error) {
		var n int
		_, err := st.Update(ctx, []string{"chat/len", "chat/closed"}, func(cur []state.Entry) ([]state.Write, error) {
			if cur[1].Found() {
				return nil, errClosed
			}
			n = 0
			if cur[0].Found() {
				if err := cur[0].Decode(&n); err != nil {
					return nil, err
				}
			}
			n++
			return []state.Write{
				{Key: "chat/len", Value: n},
				{Key: fmt.Sprintf("chat/msg/%06d", n), Value: text},
			}, nil
		})
		return n, err
	}

	for _, text := range []string{"hello", "how are you?"} {
		n, err := appendMessage(text)
		fmt.Println(n, err)
	}
	if _, err := st.Set(ctx, "chat/closed", true); err != nil {
		log.Fatal(err)
	}
	_, err = appendMessage("too late")
	fmt.Println(errors.Is(err, errClosed))
	keys, _ := st.List(ctx, "chat/msg/")
	fmt.Println(keys.Keys)
	// Output:
	// 1 <nil>
	// 2 <nil>
	// true
	// [chat/msg/000001 chat/msg/000002]
}
