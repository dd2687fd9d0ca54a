package sidecar

import (
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
