package sqlitestate_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend/backendtest"
	"github.com/statesidecar/state/backend/sqlitestate"
)

// fileSize returns the bytes the database takes on disk: the file and its
// write-ahead log.
func fileSize(path string) int64 {
	var n int64
	for _, p := range []string{path, path + "-wal"} {
		if fi, err := os.Stat(p); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// TestHistorySoak writes for a while (backendtest.SoakEnv sets how long;
// the default is short) and checks that history stays within its limit
// throughout, with the background sweeper off, and that the file stops
// growing once history has reached its limit: trimmed events free pages
// that later events reuse.
func TestHistorySoak(t *testing.T) {
	const limit = 2_000
	path := filepath.Join(t.TempDir(), "soak.db")
	d, err := sqlitestate.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := state.New(d, &state.Options{SweepInterval: -1, HistoryMaxEvents: limit})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	dur := backendtest.SoakDuration(t, 2*time.Second)
	samples := backendtest.HistorySoak(t, st, limit, dur, func() int64 { return fileSize(path) })
	full := -1 // the first sample with a full history
	for i, s := range samples {
		t.Logf("%8v %10d writes %7d events %10d bytes on disk", s.At, s.Writes, s.Events, s.Gauge)
		if full < 0 && s.Events >= limit {
			full = i
		}
	}
	if full < 0 || full > len(samples)/2 {
		t.Logf("history filled up late in the soak (sample %d of %d): run longer (%s=3m) to see the file level off", full, len(samples), backendtest.SoakEnv)
		return
	}
	// From when history is full, the file may still grow by a write-ahead
	// log's worth (SQLite checkpoints it at about 4 MB) but not with the
	// number of writes.
	base := samples[full].Gauge
	for _, s := range samples[full:] {
		if s.Gauge > 2*base+8<<20 {
			t.Errorf("the database grew from %d bytes when history was full to %d at %v: it must level off", base, s.Gauge, s.At)
			break
		}
	}
}
