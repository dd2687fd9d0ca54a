package pgstate

import (
	"context"
	"fmt"
	"strconv"

	"github.com/statesidecar/state/backend"
)

// Ping implements backend.Pinger in one round trip: the database answers
// and accepts writes, that is it is neither a standby in recovery nor
// read-only by default. Otherwise the error matches backend.ErrUnavailable.
func (d *Driver) Ping(ctx context.Context) error {
	var standby, readOnly bool
	if err := d.pool.QueryRow(ctx, d.q.ping).Scan(&standby, &readOnly); err != nil {
		return d.fail(ctx, "ping", err)
	}
	switch {
	case standby:
		return fmt.Errorf("pgstate: ping: %w: the database is a standby in recovery and accepts no writes", backend.ErrUnavailable)
	case readOnly:
		return fmt.Errorf("pgstate: ping: %w: the database's transactions are read-only (default_transaction_read_only)", backend.ErrUnavailable)
	}
	return nil
}

// CheckConfig implements backend.ConfigChecker: it reads the server's
// settings as the driver's connections see them and warns about those that
// weaken what package state promises or let its tables grow without bound.
func (d *Driver) CheckConfig(ctx context.Context) ([]string, error) {
	rows, err := d.pool.Query(ctx, d.q.settings)
	if err != nil {
		return nil, d.fail(ctx, "checking the configuration", err)
	}
	settings := map[string]string{}
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			rows.Close()
			return nil, d.fail(ctx, "checking the configuration", err)
		}
		settings[name] = value
	}
	if err := rows.Err(); err != nil {
		return nil, d.fail(ctx, "checking the configuration", err)
	}
	return configWarnings(settings, d.pool.Config().MaxConns), nil
}

// configWarnings returns one warning per setting (as pg_settings gives
// them) that weakens the store, for a pool of at most poolMax connections.
func configWarnings(s map[string]string, poolMax int32) []string {
	var out []string
	if s["fsync"] == "off" {
		out = append(out, "PostgreSQL runs with fsync off: a crash of the server can lose or corrupt acknowledged "+
			"writes, claims, leases and revision counters, so a fence may be handed out twice. Set fsync = on.")
	}
	if s["synchronous_commit"] == "off" {
		out = append(out, "PostgreSQL runs with synchronous_commit off: a crash of the server loses the writes of "+
			"the last moments although they were acknowledged (a claim or lease its holder believes it has). "+
			"Set synchronous_commit = on (or local/remote_write).")
	}
	if v := s["default_transaction_isolation"]; v != "" && v != "read committed" {
		out = append(out, "PostgreSQL's default_transaction_isolation is "+strconv.Quote(v)+": the driver's functions "+
			"take advisory locks and then read what the previous holder committed, which only read committed "+
			"allows; under a stricter level concurrent writes of one key fail with serialization errors. "+
			"Set default_transaction_isolation = 'read committed' for the driver's user or database.")
	}
	if s["autovacuum"] == "off" {
		out = append(out, "PostgreSQL runs with autovacuum off: every overwrite, expiry sweep and history trim leaves "+
			"dead rows that nothing reclaims, so the tables and indexes grow and reads slow down. Set autovacuum = on.")
	}
	maxConns, err1 := strconv.Atoi(s["max_connections"])
	reserved, err2 := strconv.Atoi(s["superuser_reserved_connections"])
	if r, err := strconv.Atoi(s["reserved_connections"]); err == nil {
		reserved += r // PostgreSQL 16 and later
	}
	if err1 == nil && err2 == nil && int(poolMax) > maxConns-reserved {
		out = append(out, fmt.Sprintf("PostgreSQL's max_connections (%d, %d of them reserved) is below this process's "+
			"pool size (%d): calls will fail to connect under load, and every replica needs its own share. Raise "+
			"max_connections or lower pool_max_conns.", maxConns, reserved, poolMax))
	}
	return out
}
