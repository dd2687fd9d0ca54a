package redisstate

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
	"github.com/statesidecar/state/backend"
)

var _ backend.ConfigChecker = (*Driver)(nil)

// CheckConfig implements backend.ConfigChecker: it reads each master's
// persistence and eviction settings (INFO, and CONFIG GET save where
// allowed) and warns when Redis persists nothing or only snapshots, or may
// evict keys: each loses leases, claims and revision counters.
func (d *Driver) CheckConfig(ctx context.Context) ([]string, error) {
	var mu sync.Mutex
	var out []string
	check := func(ctx context.Context, c *redis.Client) error {
		ws, err := checkServer(ctx, c)
		mu.Lock()
		defer mu.Unlock()
		out = append(out, ws...)
		return err
	}
	var err error
	switch c := d.rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, check)
	case *redis.Client:
		err = check(ctx, c)
	}
	if err != nil {
		return out, d.fail(ctx, "checking the configuration", err)
	}
	return out, nil
}

// checkServer checks one server.
func checkServer(ctx context.Context, c *redis.Client) ([]string, error) {
	info, err := c.Info(ctx, "persistence", "memory").Result()
	if err != nil {
		return nil, err
	}
	f := map[string]string{}
	for line := range strings.Lines(info) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			f[k] = v
		}
	}
	addr := c.Options().Addr
	var out []string
	if f["aof_enabled"] == "0" {
		save, err := c.ConfigGet(ctx, "save").Result()
		if err == nil && strings.TrimSpace(save["save"]) == "" {
			out = append(out, fmt.Sprintf("Redis at %s persists nothing (appendonly no and no RDB save points): "+
				"a restart loses every value, run, lease and claim; fences and versions stay above the lost ones only "+
				"because a lost revision counter restarts from Redis's clock. Set appendonly yes "+
				"(with appendfsync always where fences must survive a crash).", addr))
		} else {
			out = append(out, fmt.Sprintf("Redis at %s runs without AOF (appendonly no): a crash loses the writes "+
				"since the last snapshot and restores older revision counters, so fences handed out since may be "+
				"handed out again. Set appendonly yes (with appendfsync always where fences must survive a crash).", addr))
		}
	}
	if p := f["maxmemory_policy"]; p != "" && p != "noeviction" {
		out = append(out, fmt.Sprintf("Redis at %s may evict keys under memory pressure (maxmemory-policy %s): "+
			"it can drop values, runs, leases, claims and revision counters. Set maxmemory-policy noeviction.", addr, p))
	}
	return out, nil
}
