package filestate_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/internal/proctest"
)

// Tests in this file run the test binary again as child processes that
// share one directory (internal/proctest).

func TestTwoProcessesRacingOnOneDirectoryHaveOneWinnerEach(t *testing.T) {
	proctest.Race(t, "file://"+t.TempDir())
}

func TestFencesNeverGoBackAcrossProcesses(t *testing.T) {
	proctest.Fences(t, "file://"+t.TempDir())
}

func TestKilledWriterLosesNoAcknowledgedWrite(t *testing.T) {
	dir := t.TempDir()
	proctest.KilledWriter(t, "file://"+dir, func(t *testing.T, st *state.Store) {
		// Nothing half-written is where a reader looks: every file outside
		// .tmp/ parses (the store read them all to answer), and .tmp/ holds
		// at most what the killed process was writing.
		tmp, _ := os.ReadDir(filepath.Join(dir, ".tmp"))
		if len(tmp) > 8 {
			t.Errorf("%d temporary files left: more than one per writing goroutine", len(tmp))
		}
		err := filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
			if err == nil && e.IsDir() && e.Name() == ".locks" {
				return filepath.SkipDir
			}
			if err == nil && !e.IsDir() && strings.HasSuffix(p, ".json") {
				b, err := os.ReadFile(p)
				if err != nil || len(b) == 0 || b[len(b)-1] != '\n' {
					t.Errorf("%s is not a whole file: %v", p, err)
				}
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

func TestTwoBusyProcessesBothWrite(t *testing.T) {
	proctest.Share(t, "file://"+t.TempDir())
}
