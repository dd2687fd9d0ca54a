package sidecar

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Backends and transports the sidecar knows.
const (
	BackendSQLite = "sqlite"
	BackendRedis  = "redis"
	BackendMemory = "memory"

	TransportHTTP  = "http"
	TransportStdio = "stdio"
)

// Backends lists the valid values of STATE_BACKEND.
var Backends = []string{BackendSQLite, BackendRedis, BackendMemory}

// Config is the sidecar's configuration. Load fills it from the environment
// and flags; the zero value is not valid, start from Defaults.
type Config struct {
	// Backend is "sqlite", "redis" or "memory".
	Backend string
	// DBPath is the SQLite file (Backend "sqlite").
	DBPath string
	// RedisURL is the Redis URL (Backend "redis"), redis:// or rediss://.
	RedisURL string
	// Host and Port are the HTTP bind address. Port 0 picks a free port.
	Host string
	Port int
	// Transport is "http" (Streamable HTTP at /mcp) or "stdio".
	Transport string
	// Stateful makes HTTP issue and track sessions in memory (older clients
	// then need sticky sessions behind a load balancer). By default HTTP is
	// stateless: any replica answers any request.
	Stateful bool
	// Tokens, when any, are required as bearer tokens on /mcp; each maps to
	// a namespace.
	Tokens []Token
	// AllowInsecure permits binding a non-loopback address without tokens.
	AllowInsecure bool
	// AllowReset enables the sidecar_reset tool.
	AllowReset bool
	// ClaimTTL is the default claim TTL of workflow_claim.
	ClaimTTL time.Duration
	// ShutdownTimeout bounds how long a shutdown waits for calls in flight.
	ShutdownTimeout time.Duration
	// LogLevel and LogFormat ("text" or "json") configure the logger that
	// NewLogger builds.
	LogLevel  slog.Level
	LogFormat string
}

// Defaults returns the configuration with no variable and no flag set.
func Defaults() Config {
	return Config{
		Backend:         BackendSQLite,
		DBPath:          "state_sidecar.db",
		RedisURL:        "redis://localhost:6379",
		Host:            "127.0.0.1",
		Port:            8000,
		Transport:       TransportHTTP,
		ClaimTTL:        600 * time.Second,
		ShutdownTimeout: 25 * time.Second,
		LogLevel:        slog.LevelInfo,
		LogFormat:       "text",
	}
}

// A setting is one configuration knob: its variable, its flag, and how a
// string sets it.
type setting struct {
	env, flag, usage string
	isBool           bool
	set              func(c *Config, v string) error
}

var settings = []setting{
	{"STATE_BACKEND", "backend", "storage backend: " + strings.Join(Backends, ", "), false,
		func(c *Config, v string) error {
			b := strings.ToLower(strings.TrimSpace(v))
			for _, ok := range Backends {
				if b == ok {
					c.Backend = b
					return nil
				}
			}
			return fmt.Errorf("unknown backend %q: valid values are %s", v, strings.Join(Backends, ", "))
		}},
	{"DB_PATH", "db-path", "SQLite database file", false,
		func(c *Config, v string) error { return nonEmpty(&c.DBPath, v) }},
	{"REDIS_URL", "redis-url", "Redis URL (rediss:// for TLS)", false,
		func(c *Config, v string) error { return nonEmpty(&c.RedisURL, v) }},
	{"SIDECAR_HOST", "host", "HTTP bind address", false,
		func(c *Config, v string) error { c.Host = strings.TrimSpace(v); return nil }},
	{"SIDECAR_PORT", "port", "HTTP port (0 picks a free one)", false,
		func(c *Config, v string) error {
			p, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || p < 0 || p > 65535 {
				return fmt.Errorf("%q is not a port number (0-65535)", v)
			}
			c.Port = p
			return nil
		}},
	{"SIDECAR_TRANSPORT", "transport", "transport: http (Streamable HTTP at /mcp) or stdio", false,
		func(c *Config, v string) error {
			switch t := strings.ToLower(strings.TrimSpace(v)); t {
			case TransportHTTP, TransportStdio:
				c.Transport = t
				return nil
			}
			return fmt.Errorf("unknown transport %q: valid values are http, stdio", v)
		}},
	{"SIDECAR_STATEFUL", "stateful", "HTTP sessions tracked in memory (needs sticky sessions)", true,
		func(c *Config, v string) error { return parseBool(&c.Stateful, v) }},
	{"SIDECAR_AUTH_TOKENS", "auth-tokens", "bearer tokens, comma-separated `token` or `token:namespace` (prefer the variable: flags show in ps)", false,
		func(c *Config, v string) (err error) { c.Tokens, err = ParseTokens(v); return err }},
	{"SIDECAR_ALLOW_INSECURE", "allow-insecure", "allow a non-loopback bind without tokens", true,
		func(c *Config, v string) error { return parseBool(&c.AllowInsecure, v) }},
	{"SIDECAR_ALLOW_RESET", "allow-reset", "enable the sidecar_reset tool", true,
		func(c *Config, v string) error { return parseBool(&c.AllowReset, v) }},
	{"SIDECAR_CLAIM_TTL_SECONDS", "claim-ttl-seconds", "default claim TTL of workflow_claim, in seconds", false,
		func(c *Config, v string) error { return parseSeconds(&c.ClaimTTL, v) }},
	{"SIDECAR_SHUTDOWN_TIMEOUT_SECONDS", "shutdown-timeout-seconds", "how long a shutdown waits for calls in flight, in seconds", false,
		func(c *Config, v string) error { return parseSeconds(&c.ShutdownTimeout, v) }},
	{"SIDECAR_LOG_LEVEL", "log-level", "log level: debug, info, warn, error", false,
		func(c *Config, v string) error { return c.LogLevel.UnmarshalText([]byte(strings.TrimSpace(v))) }},
	{"SIDECAR_LOG_FORMAT", "log-format", "log format: text or json", false,
		func(c *Config, v string) error {
			switch f := strings.ToLower(strings.TrimSpace(v)); f {
			case "text", "json":
				c.LogFormat = f
				return nil
			}
			return fmt.Errorf("unknown log format %q: valid values are text, json", v)
		}},
}

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("configuration error")

// Load returns the configuration: Defaults, overridden by the environment
// (read through lookupEnv, such as os.LookupEnv), overridden by flags in
// args. Usage goes to usage. Errors name the variable or flag at fault and
// wrap ErrConfig (or flag.ErrHelp for -h).
func Load(args []string, lookupEnv func(string) (string, bool), usage io.Writer) (Config, error) {
	c := Defaults()
	for _, s := range settings {
		if v, ok := lookupEnv(s.env); ok {
			if err := s.set(&c, v); err != nil {
				return Config{}, fmt.Errorf("%w: %s: %v", ErrConfig, s.env, err)
			}
		}
	}
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	fs.SetOutput(usage)
	var flagErr error
	for _, s := range settings {
		set := func(v string) error {
			if err := s.set(&c, v); err != nil {
				flagErr = fmt.Errorf("%w: -%s: %v", ErrConfig, s.flag, err)
				return err
			}
			return nil
		}
		u := s.usage + " (env " + s.env + ")"
		if s.isBool {
			fs.BoolFunc(s.flag, u, set)
		} else {
			fs.Func(s.flag, u, set)
		}
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return Config{}, err
		}
		if flagErr != nil {
			return Config{}, flagErr
		}
		return Config{}, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("%w: unexpected argument %q", ErrConfig, fs.Arg(0))
	}
	return c, nil
}

// Addr returns the HTTP bind address, host:port.
func (c Config) Addr() string { return net.JoinHostPort(c.Host, strconv.Itoa(c.Port)) }

// ErrProtectedMode is returned by CheckProtected.
var ErrProtectedMode = errors.New("protected mode")

// CheckProtected refuses, as Redis's protected mode does, an HTTP sidecar
// that would listen on a non-loopback address without bearer tokens, unless
// AllowInsecure is set. The error says how to fix it.
func (c Config) CheckProtected() error {
	if c.Transport != TransportHTTP || len(c.Tokens) > 0 || c.AllowInsecure || IsLoopback(c.Host) {
		return nil
	}
	return fmt.Errorf("%w: refusing to serve %s without authentication: anyone who can reach it could read and "+
		"change all state. Set SIDECAR_AUTH_TOKENS (or -auth-tokens) to require bearer tokens, or bind a loopback "+
		"address with SIDECAR_HOST=127.0.0.1 (or -host), or set SIDECAR_ALLOW_INSECURE=true (or -allow-insecure) "+
		"if the network is trusted", ErrProtectedMode, c.Addr())
}

// IsLoopback reports whether host names only the loopback interface:
// "localhost" or a loopback IP. An empty host (all interfaces) and other
// names are not loopback.
func IsLoopback(host string) bool {
	h := strings.Trim(host, "[]")
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(h)
	return err == nil && ip.IsLoopback()
}

func nonEmpty(dst *string, v string) error {
	if strings.TrimSpace(v) == "" {
		return errors.New("must not be empty")
	}
	*dst = strings.TrimSpace(v)
	return nil
}

func parseBool(dst *bool, v string) error {
	b, err := strconv.ParseBool(strings.TrimSpace(v))
	if err != nil {
		return fmt.Errorf("%q is not true or false", v)
	}
	*dst = b
	return nil
}

func parseSeconds(dst *time.Duration, v string) error {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || !(f > 0) || f > math.MaxInt64/float64(time.Second) { // !(f > 0) also rejects NaN
		return fmt.Errorf("%q is not a positive number of seconds", v)
	}
	*dst = time.Duration(f * float64(time.Second))
	return nil
}
