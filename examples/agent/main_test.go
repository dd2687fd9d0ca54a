package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/statesidecar/state"
)

func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" { // the demo starts this binary as its workers
		os.Exit(worker(role))
	}
	os.Exit(m.Run())
}

func TestCrashedWorkerIsResumedByAnother(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "demo.db")
	var out bytes.Buffer
	is.NoErr(demo(ctx, &out, db, 300*time.Millisecond, os.Args[0]))
	t.Log(out.String())
	is.True(strings.Contains(out.String(), "worker-A: crashing now")) // worker A really crashed
	is.True(strings.Contains(out.String(), "resuming after step 2"))  // worker B resumed after A's checkpoints

	st, err := open(ctx, db)
	is.NoErr(err)
	defer st.Close()
	page, err := st.ListRuns(ctx)
	is.NoErr(err)
	is.Equal(len(page.Runs), 1)
	res, err := st.ResumeRun(ctx, page.Runs[0].ID)
	is.NoErr(err)
	is.Equal(res.Run.Status, state.StatusDone) // the run finished
	is.Equal(res.Run.Attempt, int64(2))        // in two attempts
	by := []string{}
	for _, o := range res.Outputs {
		var v struct{ By string }
		is.NoErr(json.Unmarshal(o.Output, &v))
		by = append(by, v.By)
	}
	is.Equal(by, []string{"worker-A", "worker-A", "worker-B", "worker-B"}) // nothing done twice, nothing lost
}
