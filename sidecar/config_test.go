package sidecar

import (
	"errors"
	"flag"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/statesidecar/state"
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
	want := Config{Backend: "sqlite", DBPath: "state_sidecar.db", RedisURL: "redis://localhost:6379", StateDir: "state_sidecar_data",
		Host: "127.0.0.1", Port: 8000, Transport: "http", ClaimTTL: 600 * time.Second, IdempotencyWindow: 24 * time.Hour,
		HistoryMaxAge: 7 * 24 * time.Hour, HistoryMaxEvents: 100_000, SweepInterval: time.Minute, SweepGrace: time.Minute,
		Limits:         state.Limits{MaxKeyBytes: 1024, MaxIDBytes: 256, MaxValueBytes: 1 << 20, MaxTags: 32, MaxBatch: 1000},
		RequestTimeout: 30 * time.Second, ReadTimeout: 10 * time.Second, MaxRequestBytes: 8 << 20,
		MaxConnections: 1024, MaxConcurrentRequests: 256, MaxSessions: 1000, SessionIdleTimeout: 5 * time.Minute,
		Fair: FairConfig{MaxConcurrentRequests: 64, MaxLongPolls: 128, MaxSessions: 100,
			MaxUnauthenticatedConnections: 64, UnauthenticatedIdleTimeout: 5 * time.Second},
		Tasks:           TaskConfig{Enabled: true, DefaultTTL: time.Hour, MaxTTL: 24 * time.Hour, MaxLive: 100, ClaimTTL: 15 * time.Second},
		ShutdownTimeout: 25 * time.Second, LogLevel: slog.LevelInfo, LogFormat: "text"}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("defaults:\n got %+v\nwant %+v", c, want)
	}
}

// every is a value for every setting, unlike its default.
var every = []string{"STATE_BACKEND", "Memory", "DB_PATH", "/tmp/x.db", "SIDECAR_SQLITE_LOCK_TIMEOUT_SECONDS", "2.5",
	"REDIS_URL", "rediss://r:6380/1", "DATABASE_URL", "postgresql://u:p@db:5432/agents?schema=s",
	"S3_URL", "s3://agents/team-a?region=eu-west-1", "STATE_DIR", "/tmp/state-dir",
	"SIDECAR_HOST", "::1", "SIDECAR_PORT", "9000", "SIDECAR_TRANSPORT", "stdio", "SIDECAR_STATEFUL", "true",
	"SIDECAR_AUTH_TOKENS", "a:one, b", "SIDECAR_ALLOW_INSECURE", "1", "SIDECAR_ALLOW_RESET", "TRUE",
	"SIDECAR_ALLOW_ERASE", "true", "STATE_ENCRYPTION_KEY_URL", "file:///etc/state/kek",
	"SIDECAR_SUBJECT_FROM_PRINCIPAL", "true",
	"STATE_ENCRYPTION_PREVIOUS_KEY_URLS", "file:///etc/state/old, file:///etc/state/older",
	"SIDECAR_CLAIM_TTL_SECONDS", "1.5", "SIDECAR_IDEMPOTENCY_WINDOW_SECONDS", "3600", "SIDECAR_HISTORY_MAX_AGE_SECONDS", "0", "SIDECAR_HISTORY_MAX_EVENTS", "0",
	"SIDECAR_SWEEP_INTERVAL_SECONDS", "0", "SIDECAR_SWEEP_GRACE_SECONDS", "5",
	"SIDECAR_MAX_KEY_BYTES", "64", "SIDECAR_MAX_ID_BYTES", "32", "SIDECAR_MAX_VALUE_BYTES", "4096", "SIDECAR_MAX_TAGS", "4",
	"SIDECAR_REQUEST_TIMEOUT_SECONDS", "7", "SIDECAR_READ_TIMEOUT_SECONDS", "3", "SIDECAR_MAX_REQUEST_BYTES", "65536",
	"SIDECAR_MAX_CONNECTIONS", "10", "SIDECAR_MAX_CONCURRENT_REQUESTS", "5", "SIDECAR_MAX_SESSIONS", "20",
	"SIDECAR_SESSION_IDLE_TIMEOUT_SECONDS", "30",
	"SIDECAR_SHUTDOWN_TIMEOUT_SECONDS", "3", "SIDECAR_LOG_LEVEL", "debug", "SIDECAR_LOG_FORMAT", "json",
	// --- fair share (admission.go) ---
	"SIDECAR_TENANT_MAX_CONCURRENT_REQUESTS", "3", "SIDECAR_TENANT_MAX_LONG_POLLS", "0", "SIDECAR_TENANT_MAX_SESSIONS", "4",
	"SIDECAR_TENANT_RATE", "2.5", "SIDECAR_TENANT_BURST", "6", "SIDECAR_MAX_UNAUTHENTICATED_CONNECTIONS", "8",
	"SIDECAR_UNAUTHENTICATED_IDLE_TIMEOUT_SECONDS", "1.5",
	// --- tasks (tasks.go) ---
	"SIDECAR_TASKS", "false", "SIDECAR_TASK_TTL_SECONDS", "60", "SIDECAR_TASK_MAX_TTL_SECONDS", "120",
	"SIDECAR_TASK_MAX_LIVE", "7", "SIDECAR_TASK_CLAIM_TTL_SECONDS", "2",
	// --- console (console.go) ---
	"SIDECAR_CONSOLE", "false",
	// --- auth (auth.go) ---
	"SIDECAR_OAUTH_ISSUER", "https://idp.example.com", "SIDECAR_OAUTH_AUDIENCE", "https://state.example.com/mcp",
	"SIDECAR_OAUTH_TENANT_CLAIM", "org", "SIDECAR_OAUTH_SUBJECT_CLAIM", "client_id", "SIDECAR_OAUTH_SCOPES", "r, w,a",
	"SIDECAR_ACCESS_LOG", "true"}

func TestLoadEnvironmentThenFlags(t *testing.T) {
	e := env(every...)
	c, err := Load(nil, e, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Backend: "memory", DBPath: "/tmp/x.db", SQLiteLockTimeout: 2500 * time.Millisecond,
		RedisURL: "rediss://r:6380/1", DatabaseURL: "postgresql://u:p@db:5432/agents?schema=s",
		S3URL: "s3://agents/team-a?region=eu-west-1", StateDir: "/tmp/state-dir", Host: "::1", Port: 9000,
		Transport: "stdio", Stateful: true, Tokens: []Token{{Secret: "a", Namespace: "one"}, {Secret: "b", Namespace: ""}}, AllowInsecure: true,
		AllowReset: true, AllowErase: true, EncryptionKeyURL: "file:///etc/state/kek",
		PreviousKeyURLs: []string{"file:///etc/state/old", "file:///etc/state/older"}, SubjectFromPrincipal: true, ClaimTTL: 1500 * time.Millisecond, IdempotencyWindow: time.Hour, HistoryMaxAge: 0, HistoryMaxEvents: 0, SweepInterval: 0,
		SweepGrace: 5 * time.Second, Limits: state.Limits{MaxKeyBytes: 64, MaxIDBytes: 32, MaxValueBytes: 4096, MaxTags: 4, MaxBatch: 1000},
		RequestTimeout: 7 * time.Second, ReadTimeout: 3 * time.Second, MaxRequestBytes: 65536, MaxConnections: 10,
		MaxConcurrentRequests: 5, MaxSessions: 20, SessionIdleTimeout: 30 * time.Second,
		Fair: FairConfig{MaxConcurrentRequests: 3, MaxLongPolls: 0, MaxSessions: 4, Rate: 2.5, Burst: 6,
			MaxUnauthenticatedConnections: 8, UnauthenticatedIdleTimeout: 1500 * time.Millisecond},
		Tasks:           TaskConfig{DefaultTTL: time.Minute, MaxTTL: 2 * time.Minute, MaxLive: 7, ClaimTTL: 2 * time.Second},
		Console:         ConsoleOff,
		ShutdownTimeout: 3 * time.Second, LogLevel: slog.LevelDebug, LogFormat: "json",
		OAuth:  OAuthConfig{Issuer: "https://idp.example.com", Audience: "https://state.example.com/mcp", TenantClaim: "org", SubjectClaim: "client_id"},
		Scopes: ScopeNames{Read: "r", Write: "w", Admin: "a"}, AccessLog: true}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("from the environment:\n got %+v\nwant %+v", c, want)
	}
	if len(every) != 2*len(settings) {
		t.Fatalf("the test sets %d variables; there are %d settings", len(every)/2, len(settings))
	}

	var args []string
	for i := range settings {
		args = append(args, "-"+settings[i].flag+"="+settings[i].show(&want))
	}
	args = append(args, "-backend", "redis", "-port=0", "-transport", "http", "-stateful=false",
		"-allow-reset=false", "-allow-insecure=false", "-auth-tokens", "z", "-claim-ttl-seconds", "60",
		"-host", "[::1]", "-db-path", "rel.db", "-history-max-events", "7", "-max-tags", "9")
	c, err = Load(args, e, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want.Backend, want.Port, want.Transport, want.Stateful, want.AllowReset, want.AllowInsecure = "redis", 0, "http", false, false, false
	want.Tokens, want.ClaimTTL, want.Host, want.DBPath, want.HistoryMaxEvents, want.Limits.MaxTags = []Token{{Secret: "z", Namespace: ""}}, time.Minute, "::1", "rel.db", 7, 9
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("flags must override the environment:\n got %+v\nwant %+v", c, want)
	}

	c, err = Load([]string{"-allow-reset"}, env(), io.Discard)
	if err != nil || !c.AllowReset {
		t.Fatalf("a bare boolean flag must set it: %v %+v", err, c)
	}
}

// Deployment templates set unused variables to "": that is unset, not an
// error, and not an empty setting.
func TestEmptyVariablesAreUnset(t *testing.T) {
	var kv []string
	for i := range settings {
		kv = append(kv, settings[i].env, "")
	}
	c, err := Load(nil, env(kv...), io.Discard)
	if err != nil {
		t.Fatalf("every variable set to \"\": %v", err)
	}
	if !reflect.DeepEqual(c, Defaults()) {
		t.Fatalf("every variable set to \"\" must give the defaults:\n got %+v\nwant %+v", c, Defaults())
	}
	c, err = Load([]string{"-db-path=", "-port", " "}, env("REDIS_URL", "", "STATE_BACKEND", "sqlite", "SIDECAR_HOST", "  "), io.Discard)
	if err != nil || c.DBPath != "state_sidecar.db" || c.Port != 8000 || c.Host != "127.0.0.1" {
		t.Fatalf("empty flags and variables: %v %+v", err, c)
	}
}

// A bad value of a setting that the configuration does not use is logged,
// not fatal; the same value where it is used stops startup.
func TestUnusedSettingsNeverStopStartup(t *testing.T) {
	for _, tc := range []struct {
		used, unused []string
		bad          []string
	}{
		{[]string{"STATE_BACKEND", "redis"}, []string{"STATE_BACKEND", "sqlite"}, []string{"REDIS_URL", "localhost:6379"}},
		{[]string{"STATE_BACKEND", "sqlite"}, []string{"STATE_BACKEND", "memory"}, []string{"SIDECAR_SQLITE_LOCK_TIMEOUT_SECONDS", "soon"}},
		{[]string{"SIDECAR_TRANSPORT", "http"}, []string{"SIDECAR_TRANSPORT", "stdio"}, []string{"SIDECAR_PORT", "eighty"}},
		{[]string{"SIDECAR_TRANSPORT", "http"}, []string{"SIDECAR_TRANSPORT", "stdio"}, []string{"SIDECAR_HOST", "1.2.3.4:80"}},
		{[]string{"SIDECAR_STATEFUL", "true"}, []string{"SIDECAR_STATEFUL", "false"}, []string{"SIDECAR_MAX_SESSIONS", "-1"}},
	} {
		c, err := Load(nil, env(append(tc.unused, tc.bad...)...), io.Discard)
		if err != nil {
			t.Errorf("%v with %v: %v, want a warning only", tc.bad, tc.unused, err)
		} else if len(c.warnings) != 1 || !strings.Contains(c.warnings[0], tc.bad[0]) {
			t.Errorf("%v with %v: warnings %q, want one naming %s", tc.bad, tc.unused, c.warnings, tc.bad[0])
		}
		if _, err := Load(nil, env(append(tc.used, tc.bad...)...), io.Discard); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.bad[0]) {
			t.Errorf("%v with %v: %v, want a configuration error naming it", tc.bad, tc.used, err)
		}
	}
	// The flag of an unused setting too.
	if c, err := Load([]string{"-redis-url", "x", "-sqlite-lock-timeout-seconds", "x"}, env("STATE_BACKEND", "memory"), io.Discard); err != nil || len(c.warnings) != 2 {
		t.Errorf("unused flags: %v %q", err, c.warnings)
	}
}

func TestLoadErrorsNameTheCulprit(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  []string
		want []string
	}{
		{nil, []string{"STATE_BACKEND", "postgresql"}, []string{"STATE_BACKEND", `"postgresql"`, "sqlite, redis, postgres, memory"}},
		{[]string{"-backend", "mongo"}, nil, []string{"-backend", "sqlite, redis, postgres, memory"}},
		{nil, []string{"SIDECAR_PORT", "80a"}, []string{"SIDECAR_PORT", "port"}},
		{[]string{"-port", "70000"}, nil, []string{"-port"}},
		{nil, []string{"SIDECAR_TRANSPORT", "sse"}, []string{"SIDECAR_TRANSPORT", "http, stdio"}},
		{nil, []string{"SIDECAR_STATEFUL", "yes"}, []string{"SIDECAR_STATEFUL"}},
		{nil, []string{"SIDECAR_CLAIM_TTL_SECONDS", "0"}, []string{"SIDECAR_CLAIM_TTL_SECONDS", "positive"}},
		{nil, []string{"SIDECAR_CLAIM_TTL_SECONDS", "NaN"}, []string{"SIDECAR_CLAIM_TTL_SECONDS"}},
		{nil, []string{"SIDECAR_CLAIM_TTL_SECONDS", "1e400"}, []string{"SIDECAR_CLAIM_TTL_SECONDS"}},
		{nil, []string{"SIDECAR_HISTORY_MAX_AGE_SECONDS", "-1"}, []string{"SIDECAR_HISTORY_MAX_AGE_SECONDS"}},
		{nil, []string{"SIDECAR_HISTORY_MAX_EVENTS", "1.5"}, []string{"SIDECAR_HISTORY_MAX_EVENTS", "whole number"}},
		{nil, []string{"SIDECAR_MAX_VALUE_BYTES", "0"}, []string{"SIDECAR_MAX_VALUE_BYTES", "out of range"}},
		{nil, []string{"SIDECAR_MAX_VALUE_BYTES", "99999999999999999999"}, []string{"SIDECAR_MAX_VALUE_BYTES", "out of range"}},
		{nil, []string{"SIDECAR_MAX_REQUEST_BYTES", "1000"}, []string{"SIDECAR_MAX_REQUEST_BYTES", "SIDECAR_MAX_VALUE_BYTES"}},
		{nil, []string{"SIDECAR_REQUEST_TIMEOUT_SECONDS", "0.0000001"}, []string{"SIDECAR_REQUEST_TIMEOUT_SECONDS", "millisecond"}},
		{nil, []string{"SIDECAR_HOST", "[127.0.0.1"}, []string{"SIDECAR_HOST"}},
		{nil, []string{"SIDECAR_HOST", "[localhost]"}, []string{"SIDECAR_HOST", "IPv6"}},
		{nil, []string{"SIDECAR_AUTH_TOKENS", "a:"}, []string{"SIDECAR_AUTH_TOKENS", "namespace"}},
		{nil, []string{"SIDECAR_AUTH_TOKENS", "a,a:x"}, []string{"SIDECAR_AUTH_TOKENS", "twice"}},
		{nil, []string{"SIDECAR_LOG_FORMAT", "xml"}, []string{"SIDECAR_LOG_FORMAT"}},
		{nil, []string{"SIDECAR_LOG_LEVEL", "loud"}, []string{"SIDECAR_LOG_LEVEL", "debug, info"}},
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

// -h lists every setting with its flag, variable and default.
func TestHelpListsEverySetting(t *testing.T) {
	var out strings.Builder
	if _, err := Load([]string{"-h"}, env(), &out); !errors.Is(err, flag.ErrHelp) {
		t.Fatal(err)
	}
	d := Defaults()
	for i := range settings {
		s := &settings[i]
		re := regexp.MustCompile(`(?m)^\s+-` + regexp.QuoteMeta(s.flag) + `\s+` + regexp.QuoteMeta(s.env) + `\s+` + regexp.QuoteMeta(s.show(&d)) + `\s+\S`)
		if !re.MatchString(out.String()) {
			t.Errorf("-h has no line for -%s %s with default %q:\n%s", s.flag, s.env, s.show(&d), out.String())
		}
	}
}

// The README's settings table is the settings, in order, with their
// defaults.
func TestReadmeListsEverySetting(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "cmd", "state-sidecar", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([A-Z0-9_]+)` \\| `-([a-z0-9-]+)` \\| ([^|]+) \\|")
	var got [][3]string
	for _, m := range row.FindAllStringSubmatch(string(b), -1) {
		got = append(got, [3]string{m[1], m[2], strings.Trim(strings.TrimSpace(m[3]), "`")})
	}
	var want [][3]string
	d := Defaults()
	for i := range settings {
		want = append(want, [3]string{settings[i].env, settings[i].flag, settings[i].show(&d)})
	}
	if !slices.Equal(got, want) {
		t.Errorf("cmd/state-sidecar/README.md's settings table:\n got %q\nwant %q", got, want)
	}
}

func TestParseTokens(t *testing.T) {
	got, err := ParseTokens(" alpha:team-a , ,beta, with:colon:ns_2 , gamma:team-c|state:read, delta|state:read+state:write ")
	if err != nil {
		t.Fatal(err)
	}
	want := []Token{{Secret: "alpha", Namespace: "team-a"}, {Secret: "beta", Namespace: ""}, {Secret: "with:colon", Namespace: "ns_2"},
		{Secret: "gamma", Namespace: "team-c", Scopes: []string{"state:read"}},
		{Secret: "delta", Scopes: []string{"state:read", "state:write"}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if s := (Token{Secret: "secret", Namespace: "ns"}).String(); strings.Contains(s, "secret") {
		t.Errorf("Token.String must hide the secret: %q", s)
	}
	for _, bad := range []string{":ns", "a:", "x,x", "a|", "a:ns| + "} {
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
		{"0.0.0.0", []Token{{Secret: "t", Namespace: ""}}, false, false},
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
	c.SQLiteLockTimeout = 1500 * time.Millisecond
	if u, _ := c.StoreURL(); !strings.HasSuffix(u, "?lock_timeout=1.5s") {
		t.Errorf("SQLiteLockTimeout must reach the backend as lock_timeout: %q", u)
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

func TestAuthSettingsChecked(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{[]string{"SIDECAR_OAUTH_ISSUER", "https://idp.example.com"}, "needs SIDECAR_OAUTH_AUDIENCE"},
		{[]string{"SIDECAR_OAUTH_AUDIENCE", "https://s.example/mcp"}, "need SIDECAR_OAUTH_ISSUER"},
		{[]string{"SIDECAR_AUTH_TOKENS", "t|state:wrtie"}, `unknown scope "state:wrtie"`},
		{[]string{"SIDECAR_AUTH_TOKENS", "t|admin", "SIDECAR_OAUTH_SCOPES", "read,write,admin"}, ""},
		{[]string{"SIDECAR_OAUTH_SCOPES", "a,b"}, "three scope names"},
		{[]string{"SIDECAR_OAUTH_SCOPES", "a,a,b"}, "must differ"},
	} {
		_, err := Load(nil, env(tc.env...), io.Discard)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%v: %v", tc.env, err)
			}
			continue
		}
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want ErrConfig saying %q", tc.env, err, tc.want)
		}
	}
}

// An OAuth issuer authenticates as tokens do: protected mode lets it bind
// any address, and its refusal names it.
func TestCheckProtectedOAuth(t *testing.T) {
	c := Defaults()
	c.Host = "0.0.0.0"
	if err := c.CheckProtected(); err == nil || !strings.Contains(err.Error(), "SIDECAR_OAUTH_ISSUER") {
		t.Fatalf("without authentication: %v", err)
	}
	c.OAuth = OAuthConfig{Issuer: "https://idp.example.com", Audience: "https://s.example.com/mcp"}
	if err := c.CheckProtected(); err != nil {
		t.Fatalf("with OAuth: %v", err)
	}
}
