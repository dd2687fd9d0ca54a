package redisstate

import (
	"context"
	"slices"

	"github.com/redis/go-redis/v9"
)

// What a copy between backends (package migrate) asks of a target and a
// source beyond the Driver interface.

// raiseScript sets a namespace's revision counter (KEYS[1]) to at least
// ARGV[1]. A counter not yet there starts, as commit.lua starts it, from
// Redis's clock in microseconds, or from the floor if that is greater.
var raiseScript = redis.NewScript(`
local cur = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
if cur == 0 then
  local t = redis.call('TIME')
  cur = t[1] * 1000000 + t[2]
end
local floor = tonumber(ARGV[1])
if floor > cur then cur = floor end
redis.call('SET', KEYS[1], string.format('%d', cur))
return 1`)

// RaiseRevision makes the revisions namespace ns gives from now on greater
// than floor (it does nothing if they already are), so that records copied
// from another store are written at revisions above the ones they had
// there: a lease's fence and an entry's version keep growing across the
// copy.
func (d *Driver) RaiseRevision(ctx context.Context, ns string, floor int64) error {
	if err := d.touch(ctx, ns); err != nil {
		return err
	}
	if err := raiseScript.Run(ctx, d.rdb, []string{d.base(ns) + ":rev"}, floor).Err(); err != nil {
		return d.fail(ctx, "raise the revision of "+ns, err)
	}
	return nil
}

// Namespaces returns the namespaces of the driver's prefix that were ever
// written to (the registry Sweep visits), sorted; one that was reset since
// is among them, empty.
func (d *Driver) Namespaces(ctx context.Context) ([]string, error) {
	nss, err := d.rdb.SMembers(ctx, d.registry).Result()
	if err != nil {
		return nil, d.fail(ctx, "list namespaces", err)
	}
	slices.Sort(nss)
	return nss, nil
}
