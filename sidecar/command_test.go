package sidecar

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Help goes to standard output, whichever way it is asked for; an error
// goes to standard error, once, without the usage.
func TestHelpOnStdout(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"-help"}, {"help"}, {"serve", "-h"}, {"help", "serve"},
		{"import", "-h"}, {"help", "import"}, {"copy", "-h"}, {"help", "copy"}, {"healthcheck", "-h"}, {"help", "healthcheck"}} {
		code, out, errOut := runCommands(t, nil, args...)
		if code != 0 || !strings.HasPrefix(out, "Usage: ") || errOut != "" {
			t.Errorf("%v: exit status %d, stdout %q..., stderr %q; want 0, the usage on stdout, nothing on stderr", args, code, firstLine(out), errOut)
		}
	}
	for _, args := range [][]string{{"-no-such-flag"}, {"import", "-no-such-flag"}, {"copy", "-no-such-flag"}, {"healthcheck", "-no-such-flag"}} {
		code, out, errOut := runCommands(t, nil, args...)
		if code != 2 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "-no-such-flag") || !strings.Contains(errOut, "-h lists") {
			t.Errorf("%v: exit status %d, stdout %q, stderr %q; want 2 and one line on stderr naming the flag", args, code, out, errOut)
		}
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// A port in use is one line on stderr, and no database file is created:
// the port is taken before the store is opened.
func TestPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	db := filepath.Join(t.TempDir(), "state.db")
	code, out, errOut := runCommands(t, map[string]string{"SIDECAR_PORT": port, "DB_PATH": db})
	if code != 1 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "address already in use") {
		t.Errorf("exit status %d, stdout %q, stderr %q: want 1 and one line saying the address is in use", code, out, errOut)
	}
	if _, err := os.Stat(db); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the database file: %v; want none created", err)
	}
}
