package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// TestSQLiteBackupWhileServing checks the README's backup recipe: while
// the sidecar serves on a SQLite file and a client keeps writing, the
// sqlite3 shell's VACUUM INTO and .backup each make a copy that passes
// SQLite's integrity check and that a sidecar started on it serves, with
// every key written before the copy began. It needs the sqlite3 shell.
func TestSQLiteBackupWhileServing(t *testing.T) {
	shell, err := exec.LookPath("sqlite3")
	if err != nil {
		t.Skip("the sqlite3 shell is not installed (apt-get install sqlite3)")
	}
	dir := t.TempDir()
	db := filepath.Join(dir, "state.db")
	p, url := startHTTP(t, "DB_PATH="+db)
	for i := range 50 {
		call(t, url, "state_set", fmt.Sprintf(`{"key":"before/%d","value":%d}`, i, i))
	}

	call(t, url, "state_set", `{"key":"during","value":0}`)
	// A writer keeps the WAL busy during the copies.
	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Add(1)
	writes := 0
	go func() {
		defer wg.Done()
		for n := 0; ctx.Err() == nil; n++ {
			if !tryCall(url, "state_set", fmt.Sprintf(`{"key":"during","value":%d}`, n)) {
				return
			}
			writes++
		}
	}()

	copies := map[string]string{
		"VACUUM INTO": filepath.Join(dir, "vacuum.db"),
		".backup":     filepath.Join(dir, "backup.db"),
	}
	for how, dst := range copies {
		var args []string
		if how == ".backup" {
			args = []string{db, ".timeout 10000", ".backup '" + dst + "'"}
		} else {
			args = []string{"-cmd", ".timeout 10000", db, "VACUUM INTO '" + dst + "'"}
		}
		if out, err := exec.Command(shell, args...).CombinedOutput(); err != nil {
			t.Fatalf("sqlite3 %s: %v\n%s", how, err, out)
		}
	}
	stop()
	wg.Wait()
	if writes == 0 {
		t.Fatal("no write happened while the copies were made")
	}
	t.Logf("%d writes while the copies were made", writes)
	p.signal(t, syscall.SIGTERM)
	if code := p.exitCode(t); code != 0 {
		t.Fatalf("exit status %d", code)
	}

	for how, dst := range copies {
		if out, err := exec.Command(shell, dst, "PRAGMA integrity_check").CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "ok" {
			t.Errorf("%s copy: integrity_check %q %v", how, out, err)
		}
		q, url := startHTTP(t, "DB_PATH="+dst)
		keys := call(t, url, "state_list", `{"prefix":"before/"}`)
		if n := strings.Count(keys, `\"before/`); n != 50 { // in the text content
			t.Errorf("%s copy: %d of the 50 keys written before it: %s", how, n, keys)
		}
		got := call(t, url, "state_get", `{"key":"during"}`)
		m := regexp.MustCompile(`\\"value\\":(\d+)`).FindStringSubmatch(got)
		if m == nil {
			t.Errorf("%s copy: no value of the key written during the copy: %s", how, got)
		} else if v, _ := strconv.Atoi(m[1]); v >= writes {
			t.Errorf("%s copy: value %d of %d writes", how, v, writes)
		}
		q.signal(t, syscall.SIGTERM)
		if code := q.exitCode(t); code != 0 {
			t.Fatalf("exit status %d", code)
		}
	}
}

// tryCall calls a tool and reports whether it succeeded; for goroutines,
// which must not call t.Fatal.
func tryCall(url, tool, args string) bool {
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `}}`
	req, err := http.NewRequest(http.MethodPost, url+"/mcp", strings.NewReader(body))
	if err != nil {
		return false
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode == http.StatusOK && strings.Contains(string(out), `\"ok\":true`)
}
