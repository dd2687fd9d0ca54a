// Package rediskeys deletes what an example wrote to Redis under a key
// prefix of its own (redisstate's prefix parameter), so that a run leaves
// a shared server as it found it.
package rediskeys

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// Delete deletes every key of the Redis server at redisURL that redisstate
// wrote under prefix: they all start with the hash tag "{prefix". It stops
// at the first error.
func Delete(ctx context.Context, redisURL, prefix string) error {
	o, err := redis.ParseURL(redisURL)
	if err != nil {
		return err
	}
	rdb := redis.NewClient(o)
	defer rdb.Close()
	iter := rdb.Scan(ctx, 0, "{"+prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		if err := rdb.Del(ctx, iter.Val()).Err(); err != nil {
			return err
		}
	}
	return iter.Err()
}
