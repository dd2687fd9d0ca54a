package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/user"
	"strconv"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/encryption"
)

// Encryption at rest (STATE_ENCRYPTION_KEY_URL) and the commands that
// manage it and erase data: state-sidecar erase and state-sidecar keys.

// openEncryption returns the store's Encryption for cfg, or nil when
// STATE_ENCRYPTION_KEY_URL is unset, and logs which.
func openEncryption(ctx context.Context, cfg Config, log *slog.Logger) (state.Encryption, error) {
	if cfg.EncryptionKeyURL == "" {
		log.Info("encryption at rest: off (values, outputs, contexts and history are stored in plaintext; set STATE_ENCRYPTION_KEY_URL to turn it on)")
		return nil, nil
	}
	enc, err := encryption.Open(ctx, cfg.EncryptionKeyURL, cfg.PreviousKeyURLs...)
	if err != nil {
		return nil, fmt.Errorf("%w: STATE_ENCRYPTION_KEY_URL: %v", ErrConfig, err)
	}
	log.Info("encryption at rest: on", "key", showKeyURL(cfg.EncryptionKeyURL), "previous_keys", len(cfg.PreviousKeyURLs))
	return enc, nil
}

// EraseCommand is state-sidecar erase: erasure on request of one subject,
// or of a whole namespace.
func EraseCommand() Command {
	return Command{
		Name:  "erase",
		Usage: "erase [-namespace ns] (-subject ID | -all -yes)   erase a subject's data, or a whole namespace, leaving a tombstone in history",
		Run:   runErase,
	}
}

// KeysCommand is state-sidecar keys: the data keys of encryption at rest.
func KeysCommand() Command {
	return Command{
		Name:  "keys",
		Usage: "keys [-namespace ns] list|rotate|reencrypt|retire ID|rewrap   manage a namespace's data keys, or rewrap every key set with STATE_ENCRYPTION_KEY_URL",
		Run:   runKeys,
	}
}

// openAdmin opens the configured store in namespace ns for a command,
// without background sweeping, logging warnings to stderr.
func openAdmin(ctx context.Context, cfg Config, ns string, stderr io.Writer) (*state.Store, func(), error) {
	u, err := cfg.StoreURL()
	if err != nil {
		return nil, nil, err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	opts := &state.Options{Logger: log, Limits: cfg.Limits, SweepInterval: -1, Namespace: state.DefaultNamespace}
	if opts.Encryption, err = openEncryption(ctx, cfg, log); err != nil {
		return nil, nil, err
	}
	st, err := state.DefaultURLMux().Open(ctx, u, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("opening the %s backend at %s: %w", cfg.Backend, redact(u), err)
	}
	target, err := st.Namespace(ns)
	if err != nil {
		_ = st.Close()
		return nil, nil, fmt.Errorf("%w: -namespace: %v", ErrConfig, err)
	}
	return target, func() { _ = st.Close() }, nil
}

// operator is who a command acts as, for the tombstone of an erasure.
func operator(env Env) string {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	} else if v, ok := env.LookupEnv("USER"); ok && v != "" {
		name = v
	}
	return "cli:" + name
}

func printJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

func runErase(ctx context.Context, args []string, env Env) error {
	l := newLoader(Name+" erase", env.LookupEnv, env.Stderr, nil)
	ns := l.fs.String("namespace", state.DefaultNamespace, "the namespace (tenant) to erase in, or to erase with -all")
	subject := l.fs.String("subject", "", "erase everything written for this subject (needs STATE_ENCRYPTION_KEY_URL)")
	all := l.fs.Bool("all", false, "erase the whole namespace: every record, every history event and its data keys")
	yes := l.fs.Bool("yes", false, "confirm -all")
	if err := l.parse(args); err != nil {
		return err
	}
	if l.fs.NArg() > 0 {
		return fmt.Errorf("%w: erase takes no arguments, got %q (use -subject or -all)", ErrConfig, l.fs.Arg(0))
	}
	switch {
	case *subject != "" && *all:
		return fmt.Errorf("%w: erase takes -subject or -all, not both", ErrConfig)
	case *subject == "" && !*all:
		return fmt.Errorf("%w: erase needs -subject ID (one subject's data) or -all -yes (the whole namespace %q)", ErrConfig, *ns)
	case *all && !*yes:
		return fmt.Errorf("%w: erasing the whole namespace %q is irreversible: add -yes", ErrConfig, *ns)
	}
	cfg, err := l.finish()
	if err != nil {
		return err
	}
	st, closeStore, err := openAdmin(ctx, cfg, *ns, env.Stderr)
	if err != nil {
		return err
	}
	defer closeStore()
	ctx = state.WithPrincipal(ctx, operator(env))
	var e state.Erasure
	what := "subject"
	if *all {
		what = "namespace"
		e, err = st.EraseNamespace(ctx)
	} else {
		e, err = st.EraseSubject(ctx, *subject)
	}
	if errors.Is(err, state.ErrNoEncryption) {
		return fmt.Errorf("%w: erasing a subject needs encryption at rest: set STATE_ENCRYPTION_KEY_URL", ErrConfig)
	}
	if err != nil {
		return err
	}
	return printJSON(env.Stdout, map[string]any{"ok": true, "namespace": *ns, "erased": what, "records": e.Records,
		"events": e.Events, "keys_destroyed": e.KeysDestroyed})
}

func runKeys(ctx context.Context, args []string, env Env) error {
	l := newLoader(Name+" keys", env.LookupEnv, env.Stderr, nil)
	ns := l.fs.String("namespace", state.DefaultNamespace, "the namespace whose data keys to manage")
	if err := l.parse(args); err != nil {
		return err
	}
	rest := l.fs.Args()
	if len(rest) == 0 {
		return fmt.Errorf("%w: keys needs an action: list, rotate, reencrypt, retire ID or rewrap", ErrConfig)
	}
	action, rest := rest[0], rest[1:]
	if err := l.parse(rest); err != nil { // flags may follow the action
		return err
	}
	rest = l.fs.Args()
	var id uint64
	switch action {
	case "list", "rotate", "reencrypt", "rewrap":
		if len(rest) > 0 {
			return fmt.Errorf("%w: keys %s takes no arguments, got %q", ErrConfig, action, rest[0])
		}
	case "retire":
		if len(rest) != 1 {
			return fmt.Errorf("%w: keys retire needs one key id (keys list shows them)", ErrConfig)
		}
		var err error
		if id, err = strconv.ParseUint(rest[0], 10, 32); err != nil {
			return fmt.Errorf("%w: keys retire: key id %q is not a number", ErrConfig, rest[0])
		}
	default:
		return fmt.Errorf("%w: unknown keys action %q: list, rotate, reencrypt, retire ID or rewrap", ErrConfig, action)
	}
	cfg, err := l.finish()
	if err != nil {
		return err
	}
	if cfg.EncryptionKeyURL == "" {
		return fmt.Errorf("%w: keys needs encryption at rest: set STATE_ENCRYPTION_KEY_URL", ErrConfig)
	}
	st, closeStore, err := openAdmin(ctx, cfg, *ns, env.Stderr)
	if err != nil {
		return err
	}
	defer closeStore()
	switch action {
	case "list":
		keys, err := st.Keys(ctx)
		if err != nil {
			return err
		}
		out := make([]map[string]any, len(keys))
		for i, k := range keys {
			out[i] = map[string]any{"id": k.ID, "primary": k.Primary, "records": k.Records, "events": k.Events}
		}
		return printJSON(env.Stdout, map[string]any{"namespace": *ns, "keys": out})
	case "rotate":
		k, err := st.RotateKey(ctx)
		if err != nil {
			return err
		}
		return printJSON(env.Stdout, map[string]any{"namespace": *ns, "primary": k.ID})
	case "rewrap":
		enc, err := encryption.Open(ctx, cfg.EncryptionKeyURL, cfg.PreviousKeyURLs...)
		if err != nil {
			return fmt.Errorf("%w: STATE_ENCRYPTION_KEY_URL: %v", ErrConfig, err)
		}
		n, err := enc.Rewrap(ctx, state.DriverKeyTable(st.Driver()))
		if err != nil {
			return err
		}
		return printJSON(env.Stdout, map[string]any{"rewrapped": n})
	case "reencrypt":
		n, err := st.Reencrypt(ctx)
		if err != nil {
			return err
		}
		return printJSON(env.Stdout, map[string]any{"namespace": *ns, "reencrypted": n})
	default:
		if err := st.RetireKey(ctx, uint32(id)); err != nil {
			return err
		}
		return printJSON(env.Stdout, map[string]any{"namespace": *ns, "retired": id})
	}
}
