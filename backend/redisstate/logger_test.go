package redisstate

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
)

// go-redis's lines reach the slog handler, as warnings with a component.
func TestSlogPrintf(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, nil)).With("component", "go-redis")
	slogPrintf{l}.Printf(context.Background(), "redis: %s: connection pool: %v\n", "127.0.0.1:6379", "dial tcp: refused")
	got := buf.String()
	for _, want := range []string{"level=WARN", `msg="redis: 127.0.0.1:6379: connection pool: dial tcp: refused"`, "component=go-redis"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
}
