package redisstate

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/redis/go-redis/v9"
)

// SetLogger sends the log lines of the go-redis client (a dropped pool
// connection, a failed reconnect, a Sentinel switching masters), which it
// otherwise prints unformatted to the standard error through package log,
// to l as warnings with component=go-redis. The go-redis logger is one for
// the whole process: the last call wins. A nil l restores nothing and does
// nothing.
func SetLogger(l *slog.Logger) {
	if l == nil {
		return
	}
	redis.SetLogger(slogPrintf{l.With("component", "go-redis")})
}

// slogPrintf adapts a slog.Logger to go-redis's Printf-style logger.
type slogPrintf struct{ l *slog.Logger }

func (s slogPrintf) Printf(ctx context.Context, format string, v ...any) {
	s.l.WarnContext(ctx, strings.TrimSpace(fmt.Sprintf(format, v...)))
}
