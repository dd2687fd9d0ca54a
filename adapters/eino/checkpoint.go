// Package eino backs CloudWeGo Eino's checkpoints with a state.Store:
// CheckPointStore implements compose.CheckPointStore (and adk's, the same
// interface) and CheckPointDeleter, so that a graph or agent interrupted in
// one process (waiting for a human, or stopped by a crash) is resumed from
// its checkpoint in another process or on another replica sharing the
// store.
//
//	st, _ := state.Open(ctx, "redis://redis:6379/0")
//	cps := eino.NewCheckPointStore(st, &eino.Options{TTL: 24 * time.Hour})
//	r, _ := graph.Compile(ctx, compose.WithCheckPointStore(cps))
//	out, err := r.Invoke(ctx, in, compose.WithCheckPointID("order-42"))
//
// A checkpoint is one key-value entry, "eino/checkpoint/<id>" by default,
// holding Eino's serialized bytes base64-encoded in a JSON string, so a
// checkpoint is bounded by the store's Limits.MaxValueBytes (1 MiB of JSON
// by default, about 750 KiB of checkpoint). With a TTL, checkpoints nobody
// resumed expire by themselves; every Set starts the TTL again.
package eino

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/cloudwego/eino/compose"
	"github.com/statesidecar/state"
)

// DefaultPrefix starts the key of every checkpoint.
const DefaultPrefix = "eino/checkpoint/"

// Options configure a CheckPointStore. A nil *Options means all defaults.
type Options struct {
	// Prefix starts the key of every checkpoint. Defaults to DefaultPrefix.
	Prefix string
	// TTL makes a checkpoint expire this long after it was last written.
	// Defaults to 0: checkpoints live until deleted.
	TTL time.Duration
	// AgentID is recorded as the writer of every checkpoint, for the store's
	// history.
	AgentID string
}

// CheckPointStore keeps Eino checkpoints in a state.Store. It is safe for
// concurrent use, and several processes may share one store.
type CheckPointStore struct {
	st     *state.Store
	prefix string
	ttl    time.Duration
	agent  string
}

var _ compose.CheckPointStore = (*CheckPointStore)(nil)

// NewCheckPointStore returns a checkpoint store over st; opts may be nil.
// It returns an error for a negative TTL.
func NewCheckPointStore(st *state.Store, opts *Options) (*CheckPointStore, error) {
	c := &CheckPointStore{st: st, prefix: DefaultPrefix}
	if opts != nil {
		if opts.Prefix != "" {
			c.prefix = opts.Prefix
		}
		if opts.TTL < 0 {
			return nil, fmt.Errorf("eino: checkpoint TTL must not be negative, got %s", opts.TTL)
		}
		c.ttl, c.agent = opts.TTL, opts.AgentID
	}
	return c, nil
}

// Get returns the checkpoint with id, and false (no error) when there is
// none or it expired.
func (c *CheckPointStore) Get(ctx context.Context, id string) ([]byte, bool, error) {
	e, err := c.st.Get(ctx, c.prefix+id)
	if errors.Is(err, state.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("eino: reading checkpoint %q: %w", id, err)
	}
	var b []byte
	if err := json.Unmarshal(e.Value, &b); err != nil {
		return nil, false, fmt.Errorf("eino: decoding checkpoint %q: %w", id, err)
	}
	return b, true, nil
}

// Set stores the checkpoint with id, replacing an earlier one and starting
// its TTL again.
func (c *CheckPointStore) Set(ctx context.Context, id string, checkPoint []byte) error {
	opts := []state.SetOption{state.WithAgent(c.agent)}
	if c.ttl > 0 {
		opts = append(opts, state.WithTTL(c.ttl))
	}
	if _, err := c.st.Set(ctx, c.prefix+id, checkPoint, opts...); err != nil {
		return fmt.Errorf("eino: writing checkpoint %q: %w", id, err)
	}
	return nil
}

// Delete removes the checkpoint with id; removing a missing one is not an
// error. Eino calls it (CheckPointDeleter) to clean up checkpoints it no
// longer needs.
func (c *CheckPointStore) Delete(ctx context.Context, id string) error {
	if _, err := c.st.Delete(ctx, c.prefix+id); err != nil {
		return fmt.Errorf("eino: deleting checkpoint %q: %w", id, err)
	}
	return nil
}
