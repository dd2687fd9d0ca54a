package sidecar

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend/redisstate"
)

// Run is the serve command without the others: it loads the configuration
// from args and env.LookupEnv, refuses an unprotected public bind, opens
// the backend and serves HTTP or stdio until ctx is done (a signal) or, on
// stdio, the input ends; then it finishes the calls in flight and closes
// the store. Logs go to env.Stderr; env.Stdout carries only the stdio
// transport's JSON-RPC. Main is the whole command line.
func Run(ctx context.Context, args []string, env Env) error {
	cfg, err := Load(args, env.LookupEnv, env.Stderr)
	if err != nil {
		return err
	}
	return run(ctx, cfg, env)
}

func run(ctx context.Context, cfg Config, env Env) error {
	if err := cfg.CheckProtected(); err != nil {
		return err
	}
	log := newLogger(cfg, env.Stderr)
	if cfg.Backend == BackendRedis {
		// go-redis's own lines (a dropped connection, a reconnect) would
		// otherwise reach stderr unformatted, through package log.
		redisstate.SetLogger(log)
	}
	stopTracing, err := startTracing(ctx, &cfg, env.LookupEnv, log)
	if err != nil {
		return err
	}
	defer stopTracing()
	// The port first: a port in use is one error, before the store is
	// opened (and a SQLite file created for nothing).
	var ln net.Listener
	if cfg.Transport != TransportStdio {
		if ln, err = net.Listen("tcp", cfg.Addr()); err != nil {
			return fmt.Errorf("listening on %s: %w", cfg.Addr(), err)
		}
	}
	sc, err := New(ctx, cfg, log)
	if err != nil {
		if ln != nil {
			ln.Close()
		}
		return err
	}
	log.Info("MCP State Sidecar starting", startupAttrs(cfg, sc)...)
	if cfg.Transport == TransportStdio {
		err = sc.ServeStdio(ctx, env.Stdin, env.Stdout)
	} else {
		log.Info("listening", "addr", ln.Addr().String(), "mcp", "http://"+ln.Addr().String()+"/mcp")
		if sc.console != nil {
			log.Info("operator console", "url", "http://"+ln.Addr().String()+"/ui/")
		}
		err = sc.Serve(ctx, ln)
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

// newLogger returns the logger Run uses: text or JSON on w at cfg.LogLevel.
func newLogger(cfg Config, w io.Writer) *slog.Logger {
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

// startupAttrs are what the starting line logs: every setting the
// configuration uses (a Redis or PostgreSQL password redacted, tokens by namespace only).
func startupAttrs(cfg Config, sc *Sidecar) []any {
	attrs := []any{"version", state.Version, "backend", sc.store.Backend()}
	for i := range settings {
		s := &settings[i]
		if !s.used(&cfg) || s.env == "STATE_BACKEND" {
			continue
		}
		v := s.show(&cfg)
		if s.env == "REDIS_URL" || s.env == "DATABASE_URL" {
			v = redact(v)
		}
		attrs = append(attrs, strings.ReplaceAll(s.flag, "-", "_"), v)
	}
	if cfg.Transport == TransportHTTP {
		namespaces := make([]string, 0, len(cfg.Tokens))
		for _, t := range cfg.Tokens {
			namespaces = append(namespaces, t.String())
		}
		attrs = append(attrs, "token_namespaces", namespaces, "insecure", cfg.AllowInsecure && !cfg.authenticates())
	}
	return attrs
}
