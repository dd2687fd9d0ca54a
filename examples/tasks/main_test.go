package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// wait bounds the whole story: generous, because the machine may be busy.
const wait = 3 * time.Minute

func TestMain(m *testing.M) {
	// The story starts its replicas as "<this binary> serve ..."; in a
	// test, this binary is the test binary.
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		if err := serve(context.Background(), os.Args[2:]); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestStory: a render task started on one replica is finished by the
// other after the first is killed with SIGKILL mid-task, from the frame
// after its last checkpoint, on attempt 2.
func TestStory(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var out strings.Builder
	err := story(ctx, &out, 6, 150*time.Millisecond, 2)
	t.Log("transcript:\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{
		"frame 2 of 6 drawn by replica-a (attempt 1)",
		"replica-a killed (SIGKILL) after frame 2",
		"drawn by replica-b (attempt 2)",
		"tasks/result on replica-b: rendered 6 frames: replica-b finished them on attempt 2, from frame",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("the transcript lacks %q", want)
		}
	}
	// replica-b resumed after replica-a's last checkpoint: frame 3, or 4
	// when replica-a drew one more before the kill landed.
	if !strings.Contains(s, "from frame 3") && !strings.Contains(s, "from frame 4") {
		t.Error("replica-b did not resume from replica-a's last checkpoint")
	}
	if strings.Contains(s, "drawn by replica-b (attempt 2)") && strings.Contains(s, "frame 1 of 6 drawn by replica-b") {
		t.Error("replica-b started over instead of resuming")
	}
}
