package sidecar

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/console"
	"go.opentelemetry.io/otel/trace"
)

// Backends and transports the sidecar knows.
const (
	BackendSQLite   = "sqlite"
	BackendRedis    = "redis"
	BackendPostgres = "postgres"
	BackendMemory   = "memory"
	// --- object-store backends (issue 23) ---
	BackendS3   = "s3"
	BackendFile = "file"
	// --- end object-store backends ---

	TransportHTTP  = "http"
	TransportStdio = "stdio"
)

// Backends lists the valid values of STATE_BACKEND.
var Backends = []string{BackendSQLite, BackendRedis, BackendPostgres, BackendMemory, BackendS3, BackendFile}

// Config is the sidecar's configuration. Load fills it from the environment
// and flags; the zero value is not valid, start from Defaults. Where a
// duration or a count says "0 means no limit", 0 is a valid setting.
type Config struct {
	// Backend is "sqlite", "redis", "postgres", "memory", "s3" or "file".
	Backend string
	// DBPath is the SQLite file (Backend "sqlite").
	DBPath string
	// SQLiteLockTimeout bounds how long a SQLite write waits for another
	// process's write lock before it fails as busy (Backend "sqlite"); 0
	// keeps the backend's own default.
	SQLiteLockTimeout time.Duration
	// RedisURL is the Redis URL (Backend "redis"), redis:// or rediss://.
	RedisURL string
	// DatabaseURL is the PostgreSQL URL (Backend "postgres"), postgres://
	// or postgresql://.
	DatabaseURL string
	// --- object-store backends (issue 23) ---
	// S3URL is the bucket and prefix of Backend "s3": s3://bucket/prefix,
	// with the parameters region, endpoint and path_style.
	S3URL string
	// StateDir is the directory of Backend "file".
	StateDir string
	// --- end object-store backends ---

	// Host and Port are the HTTP bind address. Port 0 picks a free port.
	// Host is a name or an IP address, IPv6 with or without brackets.
	Host string
	Port int
	// Transport is "http" (Streamable HTTP at /mcp) or "stdio".
	Transport string
	// Stateful makes HTTP issue and track sessions in memory (older clients
	// then need sticky sessions behind a load balancer). By default HTTP is
	// stateless: any replica answers any request.
	Stateful bool
	// Tokens, when any, are required as bearer tokens on /mcp; each maps to
	// a namespace and grants scopes.
	Tokens []Token
	// OAuth, when its Issuer is set, makes /mcp accept (and require) JWT
	// access tokens of that issuer too.
	OAuth OAuthConfig
	// Scopes names the scopes of the read, write and admin access levels;
	// the zero value means DefaultScopeNames.
	Scopes ScopeNames
	// AccessLog logs every tool call with its caller's principal.
	AccessLog bool
	// AllowInsecure permits binding a non-loopback address without tokens.
	AllowInsecure bool
	// AllowReset enables the sidecar_reset tool.
	AllowReset bool
	// AllowErase offers the sidecar_erase tool (an admin tool: erasure of
	// a subject or of the namespace).
	AllowErase bool
	// EncryptionKeyURL, when set, turns on encryption at rest with data
	// keys wrapped by the key it names (package encryption: base64key://,
	// file://, vault://, gcpkms://, awskms://). Off when empty.
	EncryptionKeyURL string
	// PreviousKeyURLs are key URLs that only unwrap, during a rotation of
	// the key-encryption key (state-sidecar keys rewrap).
	PreviousKeyURLs []string
	// SubjectFromPrincipal makes each caller's principal the subject of
	// its writes (mcpadapter.Options.SubjectFromPrincipal), so that
	// sidecar_erase can erase one user's data. Needs EncryptionKeyURL.
	SubjectFromPrincipal bool

	// ClaimTTL is the default claim TTL of workflow_claim.
	ClaimTTL time.Duration
	// IdempotencyWindow is how long an idempotency_key of workflow_create
	// keeps returning the run it made.
	IdempotencyWindow time.Duration
	// HistoryMaxAge removes history entries older than this; 0 keeps them
	// regardless of age.
	HistoryMaxAge time.Duration
	// HistoryMaxEvents keeps at most this many newest history entries per
	// namespace; 0 means no limit.
	HistoryMaxEvents int64
	// SweepInterval is how often expired records and old history are
	// removed in the background; 0 turns the background sweeper off.
	SweepInterval time.Duration
	// SweepGrace keeps an expired record this long before a sweep removes
	// it (state.Options.SweepGrace).
	SweepGrace time.Duration
	// Limits bound keys, ids, values and tags (state.Options.Limits).
	Limits state.Limits

	// RequestTimeout is the deadline of every tool call, over HTTP and
	// stdio: a call still waiting on the backend then fails.
	RequestTimeout time.Duration
	// ReadTimeout bounds how long a client may take to send a request's
	// headers and, separately, its body; a slower client is cut off.
	ReadTimeout time.Duration
	// MaxRequestBytes bounds the body of one HTTP request.
	MaxRequestBytes int64
	// MaxConnections caps the open HTTP connections; more wait to be
	// accepted.
	MaxConnections int
	// MaxConcurrentRequests caps the /mcp requests being served at once
	// (after their body arrived); more wait for a slot until their deadline.
	MaxConcurrentRequests int
	// MaxSessions caps the live sessions of a Stateful server; an initialize
	// beyond it is refused with 503 until sessions end or go idle.
	MaxSessions int
	// SessionIdleTimeout ends a Stateful server's session after this long
	// without a request (a session with an open GET stream is kept alive by
	// heartbeats).
	SessionIdleTimeout time.Duration
	// Fair is each tenant's share of the HTTP server (admission.go).
	Fair FairConfig

	// Tasks configures durable MCP tasks (tasks.go).
	Tasks TaskConfig

	// Console turns the operator console at /ui on or off (console.go);
	// "" is ConsoleAuto.
	Console ConsoleMode
	// ConsoleAuthorize, when set, is asked by the console before every
	// page (console.ScopeRead) and action (console.ScopeWrite or
	// console.ScopeAdmin), with the request as authenticated (its token's
	// namespace in the context); an error refuses it with 403. It is the
	// hook for a policy of the host's own. Nil means the token's scopes
	// decide, as for the tools: read to see the pages, write to delete a key
	// or cancel a task, admin to release a claim or fail a run (a token
	// without scopes has them all).
	ConsoleAuthorize func(r *http.Request, need console.Scope) error

	// ShutdownTimeout bounds how long a shutdown waits for calls in flight.
	ShutdownTimeout time.Duration
	// LogLevel and LogFormat ("text" or "json") configure the logger that
	// Run builds.
	LogLevel  slog.Level
	LogFormat string

	// TracerProvider, if set, traces the sidecar with OpenTelemetry: a span
	// per tool call (mcpadapter.Options.TracerProvider), whose parent is the
	// trace context of the call's params._meta or of the HTTP request's
	// headers, and a span per backend call beneath it (package otelstate).
	// Nil means no tracing and no tracing work. Run sets it from the OTEL_*
	// environment variables.
	TracerProvider trace.TracerProvider

	// warnings are settings Load ignored because nothing configured uses
	// them; New logs them.
	warnings []string
	// storeURL, when set, is the store's URL whatever Backend says (tests
	// open drivers of their own through it).
	storeURL string
}

// Defaults returns the configuration with no variable and no flag set.
func Defaults() Config {
	return Config{
		Backend:   BackendSQLite,
		DBPath:    "state_sidecar.db",
		RedisURL:  "redis://localhost:6379",
		StateDir:  "state_sidecar_data", // object-store backends (issue 23)
		Host:      "127.0.0.1",
		Port:      8000,
		Transport: TransportHTTP,

		ClaimTTL:          state.DefaultClaimTTL,
		IdempotencyWindow: state.DefaultIdempotencyWindow,
		HistoryMaxAge:     state.DefaultHistoryMaxAge,
		HistoryMaxEvents:  state.DefaultHistoryMaxEvents,
		SweepInterval:     state.DefaultSweepInterval,
		SweepGrace:        state.DefaultSweepGrace,
		Limits: state.Limits{MaxKeyBytes: state.DefaultMaxKeyBytes, MaxIDBytes: state.DefaultMaxIDBytes,
			MaxValueBytes: state.DefaultMaxValueBytes, MaxTags: state.DefaultMaxTags, MaxBatch: state.DefaultMaxBatch},

		RequestTimeout:        30 * time.Second,
		ReadTimeout:           10 * time.Second,
		MaxRequestBytes:       8 << 20,
		MaxConnections:        1024,
		MaxConcurrentRequests: 256,
		MaxSessions:           1000,
		SessionIdleTimeout:    5 * time.Minute,

		Fair:  DefaultFairConfig(),
		Tasks: DefaultTaskConfig(),

		ShutdownTimeout: 25 * time.Second,
		LogLevel:        slog.LevelInfo,
		LogFormat:       "text",
	}
}

// ErrConfig is wrapped by every configuration error and every usage error
// (exit status 2).
var ErrConfig = errors.New("configuration error")

// Load returns the configuration: Defaults, overridden by the environment
// (read through lookupEnv, such as os.LookupEnv), overridden by flags in
// args. A variable or flag set to the empty string counts as unset. A bad
// value of a setting that the configuration does not use (REDIS_URL on
// SQLite, the HTTP settings on stdio) is not an error: New logs it as a
// warning. Usage (-h) goes to usage. Errors name the variable or flag at
// fault and wrap ErrConfig (or are flag.ErrHelp for -h).
func Load(args []string, lookupEnv func(string) (string, bool), usage io.Writer) (Config, error) {
	l := newLoader("state-sidecar", lookupEnv, usage, nil)
	if err := l.parse(args); err != nil {
		return Config{}, err
	}
	if l.fs.NArg() > 0 {
		return Config{}, fmt.Errorf("%w: unexpected argument %q", ErrConfig, l.fs.Arg(0))
	}
	return l.finish()
}

// A loader applies the environment and then the flags to a Config,
// collecting the bad values it meets.
type loader struct {
	c    Config
	bad  []badValue
	fs   *flag.FlagSet
	name string
	// help is where -h prints usage (standard output for the command);
	// a parse error prints nothing: it is returned.
	help  io.Writer
	usage func(w io.Writer)
}

// badValue is a value a setting rejected, and where it came from.
type badValue struct {
	s      *setting
	source string // the variable, or the flag with its dash
	err    error
}

// newLoader applies the environment and declares a flag per setting on a
// flag set whose -h prints writeUsage(name, commands) to usage.
func newLoader(name string, lookupEnv func(string) (string, bool), usage io.Writer, commands []Command) *loader {
	l := &loader{c: Defaults(), name: name, help: usage,
		usage: func(w io.Writer) { writeUsage(w, name, commands) }}
	for i := range settings {
		s := &settings[i]
		v, ok := lookupEnv(s.env)
		if !ok || strings.TrimSpace(v) == "" {
			continue // deployment templates set unused variables to ""
		}
		if err := s.set(&l.c, v); err != nil {
			l.bad = append(l.bad, badValue{s, s.env, err})
		}
	}
	l.fs = flag.NewFlagSet(name, flag.ContinueOnError)
	l.fs.SetOutput(io.Discard) // parse prints the help, and returns errors
	l.fs.Usage = func() {}
	for i := range settings {
		s := &settings[i]
		set := func(v string) error {
			if strings.TrimSpace(v) == "" {
				return nil
			}
			if err := s.set(&l.c, v); err != nil {
				l.bad = append(l.bad, badValue{s, "-" + s.flag, err})
			}
			return nil
		}
		if s.isBool {
			l.fs.BoolFunc(s.flag, s.usage, set)
		} else {
			l.fs.Func(s.flag, s.usage, set)
		}
	}
	return l
}

// parse parses the flags. -h prints the usage to l.help and is
// flag.ErrHelp; a bad flag is an ErrConfig error, printed by nobody here.
func (l *loader) parse(args []string) error {
	if err := l.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			l.usage(l.help)
			return err
		}
		return fmt.Errorf("%w: %v (-h lists the flags)", ErrConfig, err)
	}
	return nil
}

// finish returns the configuration, or the first bad value of a setting
// the configuration uses.
func (l *loader) finish() (Config, error) {
	c := l.c
	for _, b := range l.bad {
		if !b.s.used(&c) {
			c.warnings = append(c.warnings, fmt.Sprintf("%s ignored (%s): %v", b.source, b.s.unusedBecause(&c), b.err))
			continue
		}
		return Config{}, fmt.Errorf("%w: %s: %v", ErrConfig, b.source, b.err)
	}
	if err := c.checkAuth(); err != nil {
		return Config{}, err
	}
	if c.SubjectFromPrincipal && c.EncryptionKeyURL == "" {
		return Config{}, fmt.Errorf("%w: SIDECAR_SUBJECT_FROM_PRINCIPAL needs encryption at rest: set STATE_ENCRYPTION_KEY_URL", ErrConfig)
	}
	if c.Transport == TransportHTTP && c.MaxRequestBytes < int64(c.Limits.MaxValueBytes) {
		return Config{}, fmt.Errorf("%w: SIDECAR_MAX_REQUEST_BYTES (%d) is below SIDECAR_MAX_VALUE_BYTES (%d): the largest value could not be sent",
			ErrConfig, c.MaxRequestBytes, c.Limits.MaxValueBytes)
	}
	return c, nil
}

// Addr returns the HTTP bind address, host:port (IPv6 in brackets).
func (c Config) Addr() string { return net.JoinHostPort(c.Host, strconv.Itoa(c.Port)) }

// ErrProtectedMode is returned by CheckProtected.
var ErrProtectedMode = errors.New("protected mode")

// CheckProtected refuses, as Redis's protected mode does, an HTTP sidecar
// that would listen on a non-loopback address without bearer tokens, unless
// AllowInsecure is set. The error says how to fix it.
func (c Config) CheckProtected() error {
	if c.Transport != TransportHTTP || c.authenticates() || c.AllowInsecure || isLoopback(c.Host) {
		return nil
	}
	return fmt.Errorf("%w: refusing to serve %s without authentication: anyone who can reach it could read and "+
		"change all state. Set SIDECAR_AUTH_TOKENS (or -auth-tokens) to require bearer tokens, or SIDECAR_OAUTH_ISSUER "+
		"and SIDECAR_OAUTH_AUDIENCE to require OAuth access tokens, or bind a loopback "+
		"address with SIDECAR_HOST=127.0.0.1 (or -host), or set SIDECAR_ALLOW_INSECURE=true (or -allow-insecure) "+
		"if the network is trusted", ErrProtectedMode, c.Addr())
}

// isLoopback reports whether host names only the loopback interface:
// "localhost" or a loopback IP. An empty host (all interfaces) and other
// names are not loopback.
func isLoopback(host string) bool {
	h := strings.Trim(host, "[]")
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(h)
	return err == nil && ip.IsLoopback()
}
