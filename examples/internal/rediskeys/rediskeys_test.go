package rediskeys_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/statesidecar/state/examples/internal/rediskeys"
	"github.com/statesidecar/state/internal/skipnote"
)

// Delete removes the keys of its prefix and no other.
func TestDeleteOnlyThePrefix(t *testing.T) {
	url := os.Getenv("STATE_TEST_REDIS_URL")
	if url == "" {
		skipnote.Note("STATE_TEST_REDIS_URL", "Redis")
		t.Skip("STATE_TEST_REDIS_URL is not set")
	}
	ctx := context.Background()
	o, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(o)
	defer rdb.Close()
	run := fmt.Sprintf("rediskeys-test-%d", time.Now().UnixNano())
	mine := []string{"{" + run + ":}:kv:a", "{" + run + ":}:kv:b"}
	other := "{" + "other-" + run + ":}:kv:a"
	for _, k := range append(mine, other) {
		if err := rdb.Set(ctx, k, "1", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	defer rdb.Del(ctx, other)
	if err := rediskeys.Delete(ctx, url, run+":"); err != nil {
		t.Fatal(err)
	}
	if n, err := rdb.Exists(ctx, mine...).Result(); err != nil || n != 0 {
		t.Errorf("%d of the prefix's keys are left (%v), want none", n, err)
	}
	if n, err := rdb.Exists(ctx, other).Result(); err != nil || n != 1 {
		t.Errorf("another prefix's key was deleted (%v)", err)
	}
}
