package redisstate

import (
	"context"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/statesidecar/state/backend"
)

var (
	_ backend.Notifier           = (*Driver)(nil)
	_ backend.ConsecutiveHistory = (*Driver)(nil)
)

// changesSuffix ends the name of a namespace's channel, "<base>:changes",
// to which every script that writes publishes (lua/base.lua). The name
// carries the namespace's hash tag, so it lies in the namespace's Cluster
// slot.
const changesSuffix = ":changes"

// Notify implements backend.Notifier over Redis pub/sub, on one connection
// however many wait: it subscribes to the pattern of every namespace's
// channel under the driver's prefix and calls fn with the namespace of
// each message. When the connection drops, go-redis reconnects and
// subscribes again; Notify then calls fn("") because messages published
// meanwhile are lost.
//
// In Redis Cluster a PUBLISH is broadcast to every node, so one
// subscription on any node hears every namespace; the price is one message
// on the cluster bus per write. (Sharded pub/sub would keep each message in
// its shard but takes one subscription per namespace and shard.)
func (d *Driver) Notify(ctx context.Context, fn func(ns string)) error {
	open := "{" + d.prefix + ":"
	ps := d.rdb.PSubscribe(ctx, globEscape(open)+"*}"+changesSuffix)
	// A client without ContextTimeoutEnabled does not end a blocked read
	// when ctx ends: closing the subscription does.
	stop := context.AfterFunc(ctx, func() { _ = ps.Close() })
	defer stop()
	defer ps.Close()
	for {
		msg, err := ps.Receive(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		switch m := msg.(type) {
		case *redis.Message:
			ns := strings.TrimSuffix(strings.TrimPrefix(m.Channel, open), "}"+changesSuffix)
			fn(ns)
		case *redis.Subscription:
			// Listening: at first, and again after a reconnection, when
			// messages published meanwhile are lost.
			fn("")
		}
		if err != nil {
			fn("")
			t := time.NewTimer(100 * time.Millisecond) // Redis is down: do not spin
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		}
	}
}

// globEscape escapes the characters a Redis glob pattern gives a meaning.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\^`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// ConsecutiveHistory implements backend.ConsecutiveHistory: an event's id
// is its position in the namespace's log plus what was ever removed from
// its head (lua/base.lua), and scripts run one at a time.
func (d *Driver) ConsecutiveHistory() bool { return true }
