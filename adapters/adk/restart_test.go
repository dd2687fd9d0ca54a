package adk_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/matryer/is"
	"github.com/statesidecar/state/adapters/adk"
	"github.com/statesidecar/state/internal/storetest"
	"google.golang.org/adk/v2/session"
)

// An ADK agent's conversation survives its process: examples/chat runs one
// turn per process, and the second process continues the session the first
// one stored, on every backend several processes can share.
func TestSessionSurvivesProcessRestart(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "chat")
	if out, err := exec.Command("go", "build", "-o", bin, "./examples/chat").CombinedOutput(); err != nil {
		t.Fatalf("building examples/chat: %v\n%s", err, out)
	}
	storetest.Run(t, func(t *testing.T, b storetest.Backend) {
		if !b.Shared {
			t.Skip("the memory backend lives in one process")
		}
		is := is.New(t)
		turn := func(say string) string {
			out, err := exec.CommandContext(t.Context(), bin, "-store", b.URL, "-session", "s1", "-user", "ada", "-say", say).CombinedOutput()
			if err != nil {
				t.Fatalf("chat %q: %v\n%s", say, err, out)
			}
			return strings.TrimSpace(string(out))
		}
		is.Equal(turn("hello"), `turn 1: you said "hello"`)
		// A new process: the model sees the first turn only through the store.
		is.Equal(turn("still there?"), `turn 2: you said "still there?", and before that "hello"`)

		svc := adk.NewSessionService(storetest.Open(t, b.URL, nil), nil)
		got, err := svc.Get(t.Context(), &session.GetRequest{AppName: "chat", UserID: "ada", SessionID: "s1"})
		is.NoErr(err)
		is.Equal(got.Session.Events().Len(), 4) // two user messages, two replies
		reply, err := got.Session.State().Get("last_reply")
		is.NoErr(err)
		is.Equal(reply, `turn 2: you said "still there?", and before that "hello"`) // the agent's output key
	})
}
