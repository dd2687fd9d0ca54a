package encryption_test

// The store semantics of the conformance suite on encrypted stores over
// the backends whose drivers have native fast paths of their own (their
// scripts and SQL write history events beside the values package state
// seals).

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/backend/backendtest"
	"github.com/statesidecar/state/backend/filestate"
	"github.com/statesidecar/state/backend/pgstate"
	"github.com/statesidecar/state/backend/redisstate"
	"github.com/statesidecar/state/backend/s3state"
	"github.com/statesidecar/state/internal/pgtest"
	"github.com/statesidecar/state/internal/redistest"
	"github.com/statesidecar/state/internal/s3test"
)

func TestConformanceEncryptedRedis(t *testing.T) {
	u := redistest.URL(t)
	ctx := context.Background()
	opt, err := redis.ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	backendtest.RunEncrypted(t, func(t *testing.T) backend.Driver {
		prefix := redistest.Prefix()
		t.Cleanup(func() { _ = redistest.Purge(ctx, rdb, prefix) })
		d, err := redisstate.New(ctx, rdb, &redisstate.Options{Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		return d
	}, mustKeyring(t, newKeyURL(t)))
}

func TestConformanceEncryptedPostgres(t *testing.T) {
	u := pgtest.URL(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	backendtest.RunEncrypted(t, func(t *testing.T) backend.Driver {
		d, err := pgstate.New(ctx, pool, &pgstate.Options{Schema: pgtest.Schema(t, u)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		return d
	}, mustKeyring(t, newKeyURL(t)))
}

func TestConformanceEncryptedDirectory(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	backendtest.RunEncrypted(t, func(t *testing.T) backend.Driver {
		d, err := filestate.Open(context.Background(), t.TempDir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		return d
	}, mustKeyring(t, newKeyURL(t)))
}

func TestConformanceEncryptedS3(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	f := s3test.NewFake(t, nil)
	var n atomic.Int64
	backendtest.RunEncrypted(t, func(t *testing.T) backend.Driver {
		d, err := s3state.Open(context.Background(), f.Options(fmt.Sprintf("c%d/", n.Add(1))))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		return d
	}, mustKeyring(t, newKeyURL(t)))
}
