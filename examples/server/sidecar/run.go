package sidecar

import (
	"context"
	"errors"
	"io"
	"log/slog"

	"github.com/statesidecar/state"
)

// Run is the whole sidecar program: it loads the configuration from args
// and lookupEnv, refuses an unprotected public bind, opens the backend and
// serves HTTP or stdio until ctx is done (a signal) or, on stdio, the input
// ends; then it finishes the calls in flight and closes the store. Logs go
// to stderr; stdout carries only the stdio transport's JSON-RPC.
func Run(ctx context.Context, args []string, lookupEnv func(string) (string, bool),
	stdin io.Reader, stdout, stderr io.Writer) error {
	cfg, err := Load(args, lookupEnv, stderr)
	if err != nil {
		return err
	}
	if err := cfg.CheckProtected(); err != nil {
		return err
	}
	log := NewLogger(cfg, stderr)
	sc, err := New(ctx, cfg, log)
	if err != nil {
		return err
	}
	log.Info("MCP State Sidecar starting", startupAttrs(cfg, sc)...)
	if cfg.Transport == TransportStdio {
		err = sc.ServeStdio(ctx, stdin, stdout)
	} else {
		err = sc.ListenAndServe(ctx)
	}
	if cerr := sc.Close(); cerr != nil && !errors.Is(cerr, state.ErrClosed) {
		err = errors.Join(err, cerr)
	}
	if err != nil {
		log.Error("stopped with an error", "err", err)
		return err
	}
	log.Info("stopped cleanly: store closed")
	return nil
}

// NewLogger returns the logger Run uses: text or JSON on w at cfg.LogLevel.
func NewLogger(cfg Config, w io.Writer) *slog.Logger {
	o := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, o))
	}
	return slog.New(slog.NewTextHandler(w, o))
}

// quieter returns l for a chatty dependency: below debug level only its
// warnings and errors pass (mcp-go logs every GET that stateless mode
// rejects at info level).
func quieter(l *slog.Logger, cfg Config) *slog.Logger {
	if cfg.LogLevel <= slog.LevelDebug {
		return l
	}
	return slog.New(minLevel{l.Handler(), slog.LevelWarn})
}

// minLevel is a slog.Handler that drops records below min.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (m minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= m.min && m.Handler.Enabled(ctx, l)
}

func (m minLevel) WithAttrs(a []slog.Attr) slog.Handler {
	return minLevel{m.Handler.WithAttrs(a), m.min}
}

func (m minLevel) WithGroup(name string) slog.Handler {
	return minLevel{m.Handler.WithGroup(name), m.min}
}

func startupAttrs(cfg Config, sc *Sidecar) []any {
	attrs := []any{"version", state.Version, "backend", sc.store.Backend(), "transport", cfg.Transport}
	switch cfg.Backend {
	case BackendSQLite:
		attrs = append(attrs, "db_path", cfg.DBPath)
	case BackendRedis:
		attrs = append(attrs, "redis_url", redact(cfg.RedisURL))
	}
	if cfg.Transport == TransportHTTP {
		namespaces := make([]string, 0, len(cfg.Tokens))
		for _, t := range cfg.Tokens {
			namespaces = append(namespaces, t.String())
		}
		attrs = append(attrs, "stateful", cfg.Stateful, "auth_tokens", len(cfg.Tokens),
			"token_namespaces", namespaces, "insecure", cfg.AllowInsecure && len(cfg.Tokens) == 0)
	}
	return append(attrs, "allow_reset", cfg.AllowReset, "claim_ttl", cfg.ClaimTTL)
}
