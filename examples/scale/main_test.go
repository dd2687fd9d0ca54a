package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A short run of the whole program on memory and on a SQLite file: every
// operation gets a row with a figure at each size, and the file is removed.
func TestRun(t *testing.T) {
	for _, url := range []string{"mem://", "sqlite://" + filepath.Join(t.TempDir(), "scale.db")} {
		var out bytes.Buffer
		if err := run(t.Context(), []string{"-url", url, "-sizes", "1000,2000", "-ops", "20"}, &out, io.Discard); err != nil {
			t.Fatalf("%s: %v\n%s", url, err, out.String())
		}
		t.Logf("%s\n%s", url, out.String())
		for _, op := range []string{"Get", "Set", "ClaimRun (fresh)", "TryAcquire (new)", "Discover tags+claimable",
			"Discover status=running", "Discover status=done", "List first page", "List later page", "History key",
			"History all", "bytes per 1,000 records"} {
			row := ""
			for l := range strings.Lines(out.String()) {
				if strings.HasPrefix(l, "| "+op+" |") {
					row = l
				}
			}
			if row == "" || strings.Contains(row, "n/a") {
				t.Errorf("%s: no figures for %q:\n%s", url, op, out.String())
			}
		}
		if path := strings.TrimPrefix(url, "sqlite://"); path != url {
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the SQLite file is still there: %v", err)
			}
		}
	}
}

// -storage weighs one record of each kind.
func TestStorage(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), []string{"-url", "mem://", "-storage"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "| run, created (2 tags) |") {
		t.Errorf("no run row:\n%s", out.String())
	}
}

// Bad flags are refused.
func TestParse(t *testing.T) {
	for _, args := range [][]string{{"-sizes", "100,50"}, {"-sizes", "x"}, {"-ops", "1"}, {"extra"}} {
		if _, err := parse(args, io.Discard); err == nil {
			t.Errorf("parse(%q) accepted", args)
		}
	}
}
