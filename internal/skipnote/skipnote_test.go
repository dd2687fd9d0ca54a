package skipnote

import "testing"

func TestLine(t *testing.T) {
	if got := Line("pkg"); got != "" {
		t.Fatalf("nothing skipped: Line = %q, want empty", got)
	}
	Note("STATE_TEST_POSTGRES_URL", "PostgreSQL")
	if got, want := Line("backend/pgstate"), "backend/pgstate: PostgreSQL suite skipped: set STATE_TEST_POSTGRES_URL"; got != want {
		t.Errorf("one suite: %q, want %q", got, want)
	}
	Note("STATE_TEST_REDIS_URL", "Redis")
	Note("STATE_TEST_POSTGRES_URL", "PostgreSQL") // again: once in the line
	if got, want := Line("sidecar"), "sidecar: PostgreSQL, Redis suites skipped: set STATE_TEST_POSTGRES_URL, STATE_TEST_REDIS_URL"; got != want {
		t.Errorf("two suites: %q, want %q", got, want)
	}
}

func TestPkgName(t *testing.T) {
	if got := pkgName(); got != "internal/skipnote" {
		t.Errorf("pkgName = %q, want internal/skipnote", got)
	}
}
