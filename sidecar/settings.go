package sidecar

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// A setting is one configuration knob: its variable, its flag, how a string
// sets it and how its value reads.
type setting struct {
	env, flag, usage string
	isBool           bool
	// only names what alone uses the setting: a backend, "http" or
	// "stateful"; "" means every configuration does.
	only string
	show func(c *Config) string
	set  func(c *Config, v string) error
}

const onlyStateful = "stateful"

// used reports whether the configuration c uses the setting.
func (s *setting) used(c *Config) bool {
	switch s.only {
	case "":
		return true
	case TransportHTTP:
		return c.Transport == TransportHTTP
	case onlyStateful:
		return c.Transport == TransportHTTP && c.Stateful
	}
	return c.Backend == s.only
}

// unusedBecause says why c does not use the setting.
func (s *setting) unusedBecause(c *Config) string {
	switch s.only {
	case TransportHTTP:
		return "the transport is " + c.Transport
	case onlyStateful:
		return "the sidecar is not a stateful HTTP server"
	}
	return "the backend is " + c.Backend
}

// settings are every setting, in the order -h and the README list them.
var settings = []setting{
	{env: "STATE_BACKEND", flag: "backend", usage: "storage backend: " + strings.Join(Backends, ", "),
		show: func(c *Config) string { return c.Backend },
		set: func(c *Config, v string) error {
			b := strings.ToLower(strings.TrimSpace(v))
			for _, ok := range Backends {
				if b == ok {
					c.Backend = b
					return nil
				}
			}
			return fmt.Errorf("unknown backend %q: valid values are %s", v, strings.Join(Backends, ", "))
		}},
	{env: "DB_PATH", flag: "db-path", usage: "SQLite database file", only: BackendSQLite,
		show: func(c *Config) string { return c.DBPath },
		set:  func(c *Config, v string) error { c.DBPath = strings.TrimSpace(v); return nil }},
	{env: "SIDECAR_SQLITE_LOCK_TIMEOUT_SECONDS", flag: "sqlite-lock-timeout-seconds", only: BackendSQLite,
		usage: "how long a SQLite write waits for another process's write lock before failing as busy (0: the backend's default, 5 s)",
		show:  func(c *Config) string { return showSeconds(c.SQLiteLockTimeout) },
		set:   func(c *Config, v string) error { return parseSeconds(&c.SQLiteLockTimeout, v, true) }},
	{env: "REDIS_URL", flag: "redis-url", usage: "Redis URL (rediss:// for TLS)", only: BackendRedis,
		show: func(c *Config) string { return c.RedisURL },
		set: func(c *Config, v string) error {
			u, err := url.Parse(strings.TrimSpace(v))
			if err != nil {
				return errors.New("not a URL") // the text may hold a password: not repeated
			}
			if u.Scheme != "redis" && u.Scheme != "rediss" {
				return fmt.Errorf("%q is not a redis:// or rediss:// URL", u.Redacted())
			}
			c.RedisURL = strings.TrimSpace(v)
			return nil
		}},
	{env: "DATABASE_URL", flag: "database-url", usage: "PostgreSQL URL (postgres://user:password@host:5432/db?sslmode=require)", only: BackendPostgres,
		show: func(c *Config) string {
			if c.DatabaseURL == "" {
				return "none"
			}
			return c.DatabaseURL
		},
		set: func(c *Config, v string) error {
			u, err := url.Parse(strings.TrimSpace(v))
			if err != nil {
				return errors.New("not a URL") // the text may hold a password: not repeated
			}
			if u.Scheme != "postgres" && u.Scheme != "postgresql" {
				return fmt.Errorf("%q is not a postgres:// or postgresql:// URL", u.Redacted())
			}
			c.DatabaseURL = strings.TrimSpace(v)
			return nil
		}},
	// --- object-store backends (issue 23) ---
	{env: "S3_URL", flag: "s3-url", only: BackendS3,
		usage: "S3 bucket and prefix: s3://bucket/prefix?region=eu-west-1 (AWS), or with &endpoint=http://host:port for another S3 server; " +
			"credentials from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or ~/.aws/credentials",
		show: func(c *Config) string {
			if c.S3URL == "" {
				return "none"
			}
			return c.S3URL
		},
		set: func(c *Config, v string) error {
			u, err := url.Parse(strings.TrimSpace(v))
			if err != nil {
				return errors.New("not a URL")
			}
			if u.Scheme != "s3" || u.Host == "" {
				return fmt.Errorf("%q is not an s3://bucket/prefix URL", u.Redacted())
			}
			c.S3URL = strings.TrimSpace(v)
			return nil
		}},
	{env: "STATE_DIR", flag: "state-dir", usage: "directory of the file backend (JSON files; created if missing)", only: BackendFile,
		show: func(c *Config) string { return c.StateDir },
		set:  func(c *Config, v string) error { c.StateDir = strings.TrimSpace(v); return nil }},
	// --- end object-store backends ---
	{env: "SIDECAR_HOST", flag: "host", usage: "HTTP bind address: a name or an IP address (IPv6 with or without brackets)", only: TransportHTTP,
		show: func(c *Config) string { return c.Host },
		set:  func(c *Config, v string) (err error) { c.Host, err = parseHost(v); return err }},
	{env: "SIDECAR_PORT", flag: "port", usage: "HTTP port (0 picks a free one and logs it)", only: TransportHTTP,
		show: func(c *Config) string { return strconv.Itoa(c.Port) },
		set: func(c *Config, v string) error {
			p, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || p < 0 || p > 65535 {
				return fmt.Errorf("%q is not a port number (0-65535)", v)
			}
			c.Port = p
			return nil
		}},
	{env: "SIDECAR_TRANSPORT", flag: "transport", usage: "transport: http (Streamable HTTP at /mcp) or stdio",
		show: func(c *Config) string { return c.Transport },
		set: func(c *Config, v string) error {
			switch t := strings.ToLower(strings.TrimSpace(v)); t {
			case TransportHTTP, TransportStdio:
				c.Transport = t
				return nil
			}
			return fmt.Errorf("unknown transport %q: valid values are http, stdio", v)
		}},
	{env: "SIDECAR_STATEFUL", flag: "stateful", isBool: true, only: TransportHTTP,
		usage: "HTTP sessions kept in this process's memory for clients older than protocol 2026-07-28 (needs sticky sessions)",
		show:  func(c *Config) string { return strconv.FormatBool(c.Stateful) },
		set:   func(c *Config, v string) error { return parseBool(&c.Stateful, v) }},
	{env: "SIDECAR_AUTH_TOKENS", flag: "auth-tokens", only: TransportHTTP,
		usage: "bearer tokens, comma-separated token or token:namespace (prefer the variable: flags show in ps)",
		show: func(c *Config) string {
			if len(c.Tokens) == 0 {
				return "none"
			}
			return fmt.Sprintf("%d tokens", len(c.Tokens))
		},
		set: func(c *Config, v string) (err error) { c.Tokens, err = ParseTokens(v); return err }},
	{env: "SIDECAR_OAUTH_ISSUER", flag: "oauth-issuer", only: TransportHTTP,
		usage: "OAuth 2.1 authorization server whose JWT access tokens /mcp accepts (its issuer URL: https, or http for a loopback host)",
		show:  func(c *Config) string { return orNone(c.OAuth.Issuer) },
		set:   func(c *Config, v string) error { c.OAuth.Issuer = strings.TrimSpace(v); return nil }},
	{env: "SIDECAR_OAUTH_AUDIENCE", flag: "oauth-audience", only: TransportHTTP,
		usage: "this sidecar's resource URI, the URL clients reach /mcp at: an access token's aud must contain it",
		show:  func(c *Config) string { return orNone(c.OAuth.Audience) },
		set:   func(c *Config, v string) error { c.OAuth.Audience = strings.TrimSpace(v); return nil }},
	{env: "SIDECAR_OAUTH_TENANT_CLAIM", flag: "oauth-tenant-claim", only: TransportHTTP,
		usage: "the access-token claim whose value is the caller's namespace (none: every OAuth caller uses the default namespace)",
		show:  func(c *Config) string { return orNone(c.OAuth.TenantClaim) },
		set:   func(c *Config, v string) error { c.OAuth.TenantClaim = strings.TrimSpace(v); return nil }},
	{env: "SIDECAR_OAUTH_SUBJECT_CLAIM", flag: "oauth-subject-claim", only: TransportHTTP,
		usage: "the access-token claim that names the caller, recorded in history as its principal",
		show: func(c *Config) string {
			if c.OAuth.SubjectClaim == "" {
				return "sub"
			}
			return c.OAuth.SubjectClaim
		},
		set: func(c *Config, v string) error { c.OAuth.SubjectClaim = strings.TrimSpace(v); return nil }},
	{env: "SIDECAR_OAUTH_SCOPES", flag: "oauth-scopes",
		usage: "names of the read, write and admin scopes, comma-separated (of access tokens and of SIDECAR_AUTH_TOKENS)",
		show:  func(c *Config) string { return c.scopeNames().String() },
		set:   func(c *Config, v string) (err error) { c.Scopes, err = ParseScopeNames(v); return err }},
	{env: "SIDECAR_ACCESS_LOG", flag: "access-log", isBool: true,
		usage: "log every tool call with its caller's principal, namespace, duration and outcome",
		show:  func(c *Config) string { return strconv.FormatBool(c.AccessLog) },
		set:   func(c *Config, v string) error { return parseBool(&c.AccessLog, v) }},
	{env: "SIDECAR_ALLOW_INSECURE", flag: "allow-insecure", isBool: true, only: TransportHTTP,
		usage: "allow a non-loopback bind without tokens",
		show:  func(c *Config) string { return strconv.FormatBool(c.AllowInsecure) },
		set:   func(c *Config, v string) error { return parseBool(&c.AllowInsecure, v) }},
	{env: "SIDECAR_ALLOW_RESET", flag: "allow-reset", isBool: true, usage: "enable the sidecar_reset tool",
		show: func(c *Config) string { return strconv.FormatBool(c.AllowReset) },
		set:  func(c *Config, v string) error { return parseBool(&c.AllowReset, v) }},
	{env: "SIDECAR_ALLOW_ERASE", flag: "allow-erase", isBool: true, usage: "offer the sidecar_erase tool (admin: erase a subject or the namespace)",
		show: func(c *Config) string { return strconv.FormatBool(c.AllowErase) },
		set:  func(c *Config, v string) error { return parseBool(&c.AllowErase, v) }},
	{env: "STATE_ENCRYPTION_KEY_URL", flag: "encryption-key-url",
		usage: "encrypt values, outputs, contexts and history payloads at rest, with per-namespace keys wrapped by this key: " +
			"base64key://<base64 of 32 bytes>, file:///path, vault://host:port/transit/keys/name, gcpkms://projects/..., awskms://key?region=r (off when empty)",
		show: func(c *Config) string { return showKeyURL(c.EncryptionKeyURL) },
		set: func(c *Config, v string) error {
			if c.EncryptionKeyURL = strings.TrimSpace(v); c.EncryptionKeyURL == "off" {
				c.EncryptionKeyURL = ""
			}
			return nil
		}},
	{env: "SIDECAR_SUBJECT_FROM_PRINCIPAL", flag: "subject-from-principal", isBool: true,
		usage: "make each caller's principal the subject of its writes, for sidecar_erase (needs STATE_ENCRYPTION_KEY_URL)",
		show:  func(c *Config) string { return strconv.FormatBool(c.SubjectFromPrincipal) },
		set:   func(c *Config, v string) error { return parseBool(&c.SubjectFromPrincipal, v) }},
	{env: "STATE_ENCRYPTION_PREVIOUS_KEY_URLS", flag: "encryption-previous-key-urls",
		usage: "comma-separated key URLs that only unwrap, while the key of STATE_ENCRYPTION_KEY_URL replaces them (state-sidecar keys rewrap)",
		show: func(c *Config) string {
			if len(c.PreviousKeyURLs) == 0 {
				return "none"
			}
			shown := make([]string, len(c.PreviousKeyURLs))
			for i, u := range c.PreviousKeyURLs {
				shown[i] = showKeyURL(u)
			}
			return strings.Join(shown, ",")
		},
		set: func(c *Config, v string) error {
			c.PreviousKeyURLs = nil
			for _, u := range strings.Split(v, ",") {
				if u = strings.TrimSpace(u); u != "" && u != "none" {
					c.PreviousKeyURLs = append(c.PreviousKeyURLs, u)
				}
			}
			return nil
		}},

	{env: "SIDECAR_CLAIM_TTL_SECONDS", flag: "claim-ttl-seconds", usage: "default claim TTL of workflow_claim",
		show: func(c *Config) string { return showSeconds(c.ClaimTTL) },
		set:  func(c *Config, v string) error { return parseSeconds(&c.ClaimTTL, v, false) }},
	{env: "SIDECAR_IDEMPOTENCY_WINDOW_SECONDS", flag: "idempotency-window-seconds",
		usage: "how long workflow_create's idempotency_key returns the run it made",
		show:  func(c *Config) string { return showSeconds(c.IdempotencyWindow) },
		set:   func(c *Config, v string) error { return parseSeconds(&c.IdempotencyWindow, v, false) }},
	{env: "SIDECAR_HISTORY_MAX_AGE_SECONDS", flag: "history-max-age-seconds",
		usage: "history entries older than this are removed (0: kept regardless of age)",
		show:  func(c *Config) string { return showSeconds(c.HistoryMaxAge) },
		set:   func(c *Config, v string) error { return parseSeconds(&c.HistoryMaxAge, v, true) }},
	{env: "SIDECAR_HISTORY_MAX_EVENTS", flag: "history-max-events",
		usage: "newest history entries kept per namespace (0: no limit)",
		show:  func(c *Config) string { return strconv.FormatInt(c.HistoryMaxEvents, 10) },
		set: func(c *Config, v string) error {
			n, err := parseCount(v, 0, math.MaxInt64)
			if err == nil {
				c.HistoryMaxEvents = n
			}
			return err
		}},
	{env: "SIDECAR_SWEEP_INTERVAL_SECONDS", flag: "sweep-interval-seconds",
		usage: "how often expired records and old history are removed in the background (0: never)",
		show:  func(c *Config) string { return showSeconds(c.SweepInterval) },
		set:   func(c *Config, v string) error { return parseSeconds(&c.SweepInterval, v, true) }},
	{env: "SIDECAR_SWEEP_GRACE_SECONDS", flag: "sweep-grace-seconds",
		usage: "how long an expired record is kept before a sweep removes it (it is invisible at once)",
		show:  func(c *Config) string { return showSeconds(c.SweepGrace) },
		set:   func(c *Config, v string) error { return parseSeconds(&c.SweepGrace, v, false) }},
	{env: "SIDECAR_MAX_KEY_BYTES", flag: "max-key-bytes", usage: "longest key, run id, resource id or session id",
		show: func(c *Config) string { return strconv.Itoa(c.Limits.MaxKeyBytes) },
		set:  func(c *Config, v string) error { return parseInt(&c.Limits.MaxKeyBytes, v) }},
	{env: "SIDECAR_MAX_ID_BYTES", flag: "max-id-bytes", usage: "longest agent id, holder id, workflow name, tag key or tag value",
		show: func(c *Config) string { return strconv.Itoa(c.Limits.MaxIDBytes) },
		set:  func(c *Config, v string) error { return parseInt(&c.Limits.MaxIDBytes, v) }},
	{env: "SIDECAR_MAX_VALUE_BYTES", flag: "max-value-bytes", usage: "largest value, step output or session context, as JSON",
		show: func(c *Config) string { return strconv.Itoa(c.Limits.MaxValueBytes) },
		set:  func(c *Config, v string) error { return parseInt(&c.Limits.MaxValueBytes, v) }},
	{env: "SIDECAR_MAX_TAGS", flag: "max-tags", usage: "most tags on one workflow run",
		show: func(c *Config) string { return strconv.Itoa(c.Limits.MaxTags) },
		set:  func(c *Config, v string) error { return parseInt(&c.Limits.MaxTags, v) }},

	{env: "SIDECAR_REQUEST_TIMEOUT_SECONDS", flag: "request-timeout-seconds",
		usage: "deadline of every tool call; a call still waiting on the backend then fails (long-polls get their timeout_seconds on top)",
		show:  func(c *Config) string { return showSeconds(c.RequestTimeout) },
		set:   func(c *Config, v string) error { return parseSeconds(&c.RequestTimeout, v, false) }},
	{env: "SIDECAR_READ_TIMEOUT_SECONDS", flag: "read-timeout-seconds", only: TransportHTTP,
		usage: "how long a client may take to send a request's headers, and then its body; slower clients are cut off",
		show:  func(c *Config) string { return showSeconds(c.ReadTimeout) },
		set:   func(c *Config, v string) error { return parseSeconds(&c.ReadTimeout, v, false) }},
	{env: "SIDECAR_MAX_REQUEST_BYTES", flag: "max-request-bytes", only: TransportHTTP,
		usage: "largest HTTP request body (at least SIDECAR_MAX_VALUE_BYTES)",
		show:  func(c *Config) string { return strconv.FormatInt(c.MaxRequestBytes, 10) },
		set: func(c *Config, v string) error {
			n, err := parseCount(v, 1, math.MaxInt64)
			if err == nil {
				c.MaxRequestBytes = n
			}
			return err
		}},
	{env: "SIDECAR_MAX_CONNECTIONS", flag: "max-connections", only: TransportHTTP,
		usage: "most open HTTP connections; more wait to be accepted",
		show:  func(c *Config) string { return strconv.Itoa(c.MaxConnections) },
		set:   func(c *Config, v string) error { return parseInt(&c.MaxConnections, v) }},
	{env: "SIDECAR_MAX_CONCURRENT_REQUESTS", flag: "max-concurrent-requests", only: TransportHTTP,
		usage: "most /mcp requests served at once once their body arrived; more wait for a slot until their deadline",
		show:  func(c *Config) string { return strconv.Itoa(c.MaxConcurrentRequests) },
		set:   func(c *Config, v string) error { return parseInt(&c.MaxConcurrentRequests, v) }},
	{env: "SIDECAR_MAX_SESSIONS", flag: "max-sessions", only: onlyStateful,
		usage: "most live sessions of a stateful server; an initialize beyond it gets 503",
		show:  func(c *Config) string { return strconv.Itoa(c.MaxSessions) },
		set:   func(c *Config, v string) error { return parseInt(&c.MaxSessions, v) }},
	{env: "SIDECAR_SESSION_IDLE_TIMEOUT_SECONDS", flag: "session-idle-timeout-seconds", only: onlyStateful,
		usage: "a stateful server's session ends after this long without a request (open GET streams get heartbeats)",
		show:  func(c *Config) string { return showSeconds(c.SessionIdleTimeout) },
		set:   func(c *Config, v string) error { return parseSeconds(&c.SessionIdleTimeout, v, false) }},

	{env: "SIDECAR_SHUTDOWN_TIMEOUT_SECONDS", flag: "shutdown-timeout-seconds", usage: "how long a shutdown waits for calls in flight",
		show: func(c *Config) string { return showSeconds(c.ShutdownTimeout) },
		set:  func(c *Config, v string) error { return parseSeconds(&c.ShutdownTimeout, v, false) }},
	{env: "SIDECAR_LOG_LEVEL", flag: "log-level", usage: "log level: debug, info, warn, error",
		show: func(c *Config) string { return strings.ToLower(c.LogLevel.String()) },
		set: func(c *Config, v string) error {
			var l = c.LogLevel
			if err := l.UnmarshalText([]byte(strings.TrimSpace(v))); err != nil {
				return fmt.Errorf("unknown log level %q: valid values are debug, info, warn, error", v)
			}
			c.LogLevel = l
			return nil
		}},
	{env: "SIDECAR_LOG_FORMAT", flag: "log-format", usage: "log format: text or json (always on stderr)",
		show: func(c *Config) string { return c.LogFormat },
		set: func(c *Config, v string) error {
			switch f := strings.ToLower(strings.TrimSpace(v)); f {
			case "text", "json":
				c.LogFormat = f
				return nil
			}
			return fmt.Errorf("unknown log format %q: valid values are text, json", v)
		}},
}

// writeUsage prints what -h shows: the command line, the commands and every
// setting with its flag, variable and default.
func writeUsage(w io.Writer, name string, commands []Command) {
	fmt.Fprintf(w, "Usage: %s [serve] [flags]   serve the MCP state tools (the default command)\n", name)
	fmt.Fprintf(w, "       %s version           print the version (also: -version)\n", name)
	fmt.Fprintf(w, "       %s healthcheck [-live] exit 0 when the sidecar on SIDECAR_HOST:SIDECAR_PORT is ready (-live: serving); for container probes\n", name)
	for _, c := range commands {
		fmt.Fprintf(w, "       %s %s\n", name, c.Usage)
	}
	fmt.Fprintf(w, "       %s help [command]    show this help, or a command's\n", name)
	fmt.Fprintf(w, "\nSettings: each flag overrides its environment variable; a variable set to \"\" counts as unset;\n"+
		"a bad value of a setting the configuration does not use is logged and ignored.\n\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  flag\tvariable\tdefault\tmeaning")
	d := Defaults()
	for i := range settings {
		s := &settings[i]
		fmt.Fprintf(tw, "  -%s\t%s\t%s\t%s\n", s.flag, s.env, s.show(&d), s.usage)
	}
	fmt.Fprintf(tw, "  -version\t\t\tprint the version and exit\n")
	_ = tw.Flush()
	fmt.Fprintf(w, "\n%s", tracingUsage)
}

// parseHost accepts a host name or an IP address; an IPv6 address may come
// in brackets, as in a URL ([::1]), and is kept without them.
func parseHost(v string) (string, error) {
	h := strings.TrimSpace(v)
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
		if _, err := netip.ParseAddr(h); err != nil {
			return "", fmt.Errorf("%q: brackets must hold an IPv6 address", v)
		}
		return h, nil
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return h, nil
	}
	if strings.ContainsAny(h, ":[]/ ") {
		return "", fmt.Errorf("%q is not a host name or an IP address (the port goes in SIDECAR_PORT)", v)
	}
	return h, nil
}

func parseBool(dst *bool, v string) error {
	b, err := strconv.ParseBool(strings.TrimSpace(v))
	if err != nil {
		return fmt.Errorf("%q is not true or false", v)
	}
	*dst = b
	return nil
}

// maxSeconds keeps a number of seconds within time.Duration.
const maxSeconds = float64(math.MaxInt64 / int64(time.Second))

// parseSeconds reads a number of seconds (fractions allowed): positive, or
// with zeroOK also 0.
func parseSeconds(dst *time.Duration, v string, zeroOK bool) error {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	switch {
	case err != nil || math.IsNaN(f) || f < 0 || f > maxSeconds:
		return fmt.Errorf("%q is not a number of seconds", v)
	case f == 0 && !zeroOK:
		return fmt.Errorf("%q is not a positive number of seconds", v)
	}
	d := time.Duration(math.Round(f * float64(time.Second)))
	if f > 0 && d < time.Millisecond {
		return fmt.Errorf("%q is below one millisecond", v)
	}
	*dst = d
	return nil
}

func showSeconds(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) }

// parseCount reads an integer in [lo, hi].
func parseCount(v string, lo, hi int64) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, fmt.Errorf("%q is not a whole number", v)
	}
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%q is out of range (%d to %d)", v, lo, hi)
	}
	return n, nil
}

// parseInt reads a positive int.
func parseInt(dst *int, v string) error {
	n, err := parseCount(v, 1, math.MaxInt32)
	if err != nil {
		return err
	}
	*dst = int(n)
	return nil
}

// showKeyURL shows a key URL without its secret: its scheme, and the
// key's name for a KMS (which is no secret).
func showKeyURL(u string) string {
	if u == "" {
		return "off"
	}
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		return "(invalid)"
	}
	switch scheme {
	case "base64key":
		return "base64key://(hidden)"
	case "file", "vault", "vaults", "gcpkms", "awskms":
		return scheme + "://" + rest
	}
	return scheme + "://(hidden)"
}
