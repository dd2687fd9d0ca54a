package sidecar

import (
	"errors"
	"flag"
	"io"
	"log/slog"
	"net/url"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func env(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestLoadDefaults(t *testing.T) {
	c, err := Load(nil, env(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Backend: "sqlite", DBPath: "state_sidecar.db", RedisURL: "redis://localhost:6379",
		Host: "127.0.0.1", Port: 8000, Transport: "http", ClaimTTL: 600 * time.Second,
		ShutdownTimeout: 25 * time.Second, LogLevel: slog.LevelInfo, LogFormat: "text"}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("defaults:\n got %+v\nwant %+v", c, want)
	}
}

func TestLoadEnvironmentThenFlags(t *testing.T) {
	e := env("STATE_BACKEND", "Memory", "DB_PATH", "/tmp/x.db", "REDIS_URL", "rediss://r:6380/1",
		"SIDECAR_HOST", "::1", "SIDECAR_PORT", "9000", "SIDECAR_TRANSPORT", "stdio", "SIDECAR_STATEFUL", "true",
		"SIDECAR_AUTH_TOKENS", "a:one, b", "SIDECAR_ALLOW_INSECURE", "1", "SIDECAR_ALLOW_RESET", "TRUE",
		"SIDECAR_CLAIM_TTL_SECONDS", "1.5", "SIDECAR_SHUTDOWN_TIMEOUT_SECONDS", "3",
		"SIDECAR_LOG_LEVEL", "debug", "SIDECAR_LOG_FORMAT", "json")
	c, err := Load(nil, e, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Backend: "memory", DBPath: "/tmp/x.db", RedisURL: "rediss://r:6380/1", Host: "::1", Port: 9000,
		Transport: "stdio", Stateful: true, Tokens: []Token{{"a", "one"}, {"b", ""}}, AllowInsecure: true,
		AllowReset: true, ClaimTTL: 1500 * time.Millisecond, ShutdownTimeout: 3 * time.Second,
		LogLevel: slog.LevelDebug, LogFormat: "json"}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("from the environment:\n got %+v\nwant %+v", c, want)
	}

	c, err = Load([]string{"-backend", "redis", "-port=0", "-transport", "http", "-stateful=false",
		"-allow-reset=false", "-allow-insecure=false", "-auth-tokens", "z", "-claim-ttl-seconds", "60",
		"-host", "localhost", "-db-path", "rel.db"}, e, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want = Config{Backend: "redis", DBPath: "rel.db", RedisURL: "rediss://r:6380/1", Host: "localhost", Port: 0,
		Transport: "http", Tokens: []Token{{"z", ""}}, ClaimTTL: time.Minute, ShutdownTimeout: 3 * time.Second,
		LogLevel: slog.LevelDebug, LogFormat: "json"}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("flags must override the environment:\n got %+v\nwant %+v", c, want)
	}

	c, err = Load([]string{"-allow-reset"}, env(), io.Discard)
	if err != nil || !c.AllowReset {
		t.Fatalf("a bare boolean flag must set it: %v %+v", err, c)
	}
}

func TestLoadErrorsNameTheCulprit(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  []string
		want []string
	}{
		{nil, []string{"STATE_BACKEND", "postgresql"}, []string{"STATE_BACKEND", `"postgresql"`, "sqlite, redis, memory"}},
		{[]string{"-backend", "mongo"}, nil, []string{"-backend", "sqlite, redis, memory"}},
		{nil, []string{"SIDECAR_PORT", "80a"}, []string{"SIDECAR_PORT", "port"}},
		{[]string{"-port", "70000"}, nil, []string{"-port"}},
		{nil, []string{"SIDECAR_TRANSPORT", "sse"}, []string{"SIDECAR_TRANSPORT", "http, stdio"}},
		{nil, []string{"SIDECAR_STATEFUL", "yes"}, []string{"SIDECAR_STATEFUL"}},
		{nil, []string{"SIDECAR_CLAIM_TTL_SECONDS", "0"}, []string{"SIDECAR_CLAIM_TTL_SECONDS", "positive"}},
		{nil, []string{"SIDECAR_CLAIM_TTL_SECONDS", "NaN"}, []string{"SIDECAR_CLAIM_TTL_SECONDS"}},
		{nil, []string{"SIDECAR_AUTH_TOKENS", "a:"}, []string{"SIDECAR_AUTH_TOKENS", "namespace"}},
		{nil, []string{"SIDECAR_AUTH_TOKENS", "a,a:x"}, []string{"SIDECAR_AUTH_TOKENS", "twice"}},
		{nil, []string{"DB_PATH", " "}, []string{"DB_PATH", "empty"}},
		{nil, []string{"SIDECAR_LOG_FORMAT", "xml"}, []string{"SIDECAR_LOG_FORMAT"}},
		{[]string{"extra"}, nil, []string{"extra"}},
		{[]string{"-nope"}, nil, []string{"nope"}},
	} {
		_, err := Load(tc.args, env(tc.env...), io.Discard)
		if !errors.Is(err, ErrConfig) {
			t.Errorf("%v %v: want an ErrConfig, got %v", tc.args, tc.env, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v %v: error %q does not mention %q", tc.args, tc.env, err, w)
			}
		}
	}
	if _, err := Load([]string{"-h"}, env(), io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: want flag.ErrHelp, got %v", err)
	}
}

func TestParseTokens(t *testing.T) {
	got, err := ParseTokens(" alpha:team-a , ,beta, with:colon:ns_2 ")
	if err != nil {
		t.Fatal(err)
	}
	want := []Token{{"alpha", "team-a"}, {"beta", ""}, {"with:colon", "ns_2"}}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if s := (Token{"secret", "ns"}).String(); strings.Contains(s, "secret") {
		t.Errorf("Token.String must hide the secret: %q", s)
	}
	for _, bad := range []string{":ns", "a:", "x,x"} {
		if _, err := ParseTokens(bad); err == nil {
			t.Errorf("ParseTokens(%q): want an error", bad)
		}
	}
}

func TestCheckProtected(t *testing.T) {
	for _, tc := range []struct {
		host     string
		tokens   []Token
		insecure bool
		refused  bool
	}{
		{"127.0.0.1", nil, false, false},
		{"localhost", nil, false, false},
		{"::1", nil, false, false},
		{"[::1]", nil, false, false},
		{"127.0.0.2", nil, false, false},
		{"0.0.0.0", nil, false, true},
		{"", nil, false, true},
		{"::", nil, false, true},
		{"10.1.2.3", nil, false, true},
		{"sidecar.internal", nil, false, true},
		{"0.0.0.0", []Token{{"t", ""}}, false, false},
		{"0.0.0.0", nil, true, false},
	} {
		c := Defaults()
		c.Host, c.Tokens, c.AllowInsecure = tc.host, tc.tokens, tc.insecure
		err := c.CheckProtected()
		if refused := err != nil; refused != tc.refused {
			t.Errorf("host %q tokens %d insecure %v: refused=%v (%v), want %v", tc.host, len(tc.tokens), tc.insecure, refused, err, tc.refused)
		}
		if err != nil {
			for _, w := range []string{"SIDECAR_AUTH_TOKENS", "SIDECAR_HOST=127.0.0.1", "SIDECAR_ALLOW_INSECURE=true"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the refusal must say how to fix it (%s): %v", w, err)
				}
			}
			if !errors.Is(err, ErrProtectedMode) {
				t.Errorf("want ErrProtectedMode, got %v", err)
			}
		}
	}
	c := Defaults()
	c.Host, c.Transport = "0.0.0.0", TransportStdio
	if err := c.CheckProtected(); err != nil {
		t.Errorf("stdio binds nothing and must not be refused: %v", err)
	}
}

func TestStoreURL(t *testing.T) {
	c := Defaults()
	c.DBPath = "dir/with space?and#hash.db"
	u, err := c.StoreURL()
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(c.DBPath)
	if parsed.Scheme != "sqlite" || parsed.Path != filepath.ToSlash(abs) || parsed.RawQuery != "" {
		t.Errorf("StoreURL = %q: want an absolute sqlite URL of %q", u, abs)
	}
	c.Backend = BackendMemory
	if u, _ := c.StoreURL(); u != "mem://" {
		t.Errorf("memory: %q", u)
	}
	c.Backend, c.RedisURL = BackendRedis, "redis://h:1/2"
	if u, _ := c.StoreURL(); u != "redis://h:1/2" {
		t.Errorf("redis: %q", u)
	}
}
