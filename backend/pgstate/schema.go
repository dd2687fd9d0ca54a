package pgstate

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// migrationFiles holds the schema's versions: migrations/NNN_what.sql
// brings the schema from version NNN-1 to NNN. A released file is never
// edited; changes are new files.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the embedded migrations in version order.
func migrations() ([]migration, error) {
	entries, err := migrationFiles.ReadDir("migrations")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration file %s is not named NNN_what.sql", e.Name())
		}
		b, err := migrationFiles.ReadFile(path.Join("migrations", e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: e.Name(), sql: string(b)})
	}
	slices.SortFunc(out, func(a, b migration) int { return a.version - b.version })
	for i, m := range out {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %s: expected version %d", m.name, i+1)
		}
	}
	return out, nil
}

// SchemaVersion is the schema version this package writes.
var SchemaVersion = func() int {
	ms, err := migrations()
	if err != nil {
		panic("pgstate: embedded migrations: " + err.Error())
	}
	return len(ms)
}()

// expand substitutes the schema into a migration or statement: {{s}} is
// the schema as a quoted identifier, {{s_lit}} its name as a string
// literal, {{chan_lit}} its notification channel (see channelOf) as one.
func expand(sql, schema string) string {
	return strings.NewReplacer(
		"{{s}}", pgx.Identifier{schema}.Sanitize(),
		"{{s_lit}}", literal(schema),
		"{{chan_lit}}", literal(channelOf(schema)),
	).Replace(sql)
}

func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// channelOf returns the channel the writes to schema notify on:
// "pgstate." and the schema, cut to PostgreSQL's 63 bytes. Two schemas
// sharing the cut name share a channel, which costs their listeners only
// reads that find nothing new.
func channelOf(schema string) string {
	c := "pgstate." + schema
	return c[:min(len(c), 63)]
}

// migrate brings the schema up to date. When it already is, it only reads
// the schema's version. Otherwise it runs the missing migrations
// in one transaction under an advisory lock, so that replicas starting
// together apply each migration once and never see half a schema.
func migrate(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	v, err := schemaVersion(ctx, pool, schema)
	if err != nil {
		return err
	}
	if v == len(ms) {
		return nil
	}
	if v > len(ms) {
		return tooNew(v, len(ms))
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		h := fnv.New64a()
		_, _ = h.Write([]byte("pgstate migrate " + schema))
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(h.Sum64())); err != nil {
			return fmt.Errorf("waiting for the migration lock: %w", err)
		}
		q := pgx.Identifier{schema}.Sanitize()
		if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+q); err != nil {
			return fmt.Errorf("creating the schema: %w", err)
		}
		if _, err := tx.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+q+`.migrations (
			version    integer PRIMARY KEY,
			applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return fmt.Errorf("creating the migrations table: %w", err)
		}
		var v int
		if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM "+q+".migrations").Scan(&v); err != nil {
			return fmt.Errorf("reading the schema version: %w", err)
		}
		if v > len(ms) {
			return tooNew(v, len(ms))
		}
		for _, m := range ms[v:] {
			if _, err := tx.Exec(ctx, expand(m.sql, schema)); err != nil {
				return fmt.Errorf("migrating to schema version %d (%s): %w", m.version, m.name, err)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO "+q+".migrations (version) VALUES ($1)", m.version); err != nil {
				return fmt.Errorf("recording schema version %d: %w", m.version, err)
			}
		}
		return nil
	})
}

// schemaVersion returns the schema's version, 0 when it has none yet.
func schemaVersion(ctx context.Context, pool *pgxpool.Pool, schema string) (int, error) {
	var v int
	err := pool.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM "+pgx.Identifier{schema}.Sanitize()+".migrations").Scan(&v)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "42P01" || pe.Code == "3F000") { // undefined table, undefined schema
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading the schema version: %w", err)
	}
	return v, nil
}

func tooNew(have, know int) error {
	return fmt.Errorf("the schema's version %d is newer than this library's (%d): upgrade the library", have, know)
}
