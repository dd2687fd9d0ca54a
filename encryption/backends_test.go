package encryption_test

// No plaintext in any backend: the same writes on an encrypted store and,
// as the control that shows the search can fail, on a plain one, then a
// search of everything the backend holds, read with its own client.

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/backend/filestate"
	"github.com/statesidecar/state/backend/pgstate"
	"github.com/statesidecar/state/backend/redisstate"
	"github.com/statesidecar/state/backend/s3state"
	"github.com/statesidecar/state/internal/pgtest"
	"github.com/statesidecar/state/internal/redistest"
	"github.com/statesidecar/state/internal/s3test"
)

// checkBackend writes everything on an encrypted store over enc and a
// plain one over plain, and searches what dump returns of each.
func checkBackend(t *testing.T, enc, plain backend.Driver, dumpEnc, dumpPlain func() []byte) {
	t.Helper()
	ctx := context.Background()
	est, err := state.New(enc, &state.Options{SweepInterval: -1, Encryption: mustKeyring(t, newKeyURL(t))})
	if err != nil {
		t.Fatal(err)
	}
	defer est.Close()
	pst, err := state.New(plain, &state.Options{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer pst.Close()
	writeEverything(t, est)
	writeEverything(t, pst)
	assertReadable(t, est)
	_ = ctx
	pb := dumpPlain()
	for _, s := range allSecrets {
		if !bytes.Contains(pb, []byte(s)) {
			t.Fatalf("control: the plain store's backend does not show %q; the search cannot fail", s)
		}
	}
	eb := dumpEnc()
	if !bytes.Contains(eb, []byte("profile")) {
		t.Fatalf("the encrypted store's backend does not show its keys; the dump is empty")
	}
	assertNoSecrets(t, "the backend", eb)
}

func TestNoPlaintextInRedis(t *testing.T) {
	u := redistest.URL(t)
	ctx := context.Background()
	opt, err := redis.ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	open := func() (backend.Driver, func() []byte) {
		prefix := redistest.Prefix()
		t.Cleanup(func() { _ = redistest.Purge(ctx, rdb, prefix) })
		d, err := redisstate.New(ctx, rdb, &redisstate.Options{Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		return d, func() []byte { return dumpRedis(t, rdb, prefix) }
	}
	e, de := open()
	p, dp := open()
	checkBackend(t, e, p, de, dp)
}

// dumpRedis returns every key under prefix with its DUMP and its contents
// read by type (GET, HGETALL, LRANGE, SMEMBERS, ZRANGE, XRANGE): DUMP may
// compress a long string, the typed reads never do.
func dumpRedis(t *testing.T, rdb *redis.Client, prefix string) []byte {
	ctx := context.Background()
	var out bytes.Buffer
	iter := rdb.Scan(ctx, 0, "{"+prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		out.WriteString(k + "\n")
		if d, err := rdb.Dump(ctx, k).Result(); err == nil {
			out.WriteString(d)
		}
		typ, err := rdb.Type(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		var vals []string
		switch typ {
		case "string":
			v, _ := rdb.Get(ctx, k).Result()
			vals = []string{v}
		case "hash":
			m, _ := rdb.HGetAll(ctx, k).Result()
			for f, v := range m {
				vals = append(vals, f, v)
			}
		case "list":
			vals, _ = rdb.LRange(ctx, k, 0, -1).Result()
		case "set":
			vals, _ = rdb.SMembers(ctx, k).Result()
		case "zset":
			vals, _ = rdb.ZRange(ctx, k, 0, -1).Result()
		case "stream":
			msgs, _ := rdb.XRange(ctx, k, "-", "+").Result()
			for _, m := range msgs {
				for f, v := range m.Values {
					vals = append(vals, f, toString(v))
				}
			}
		}
		for _, v := range vals {
			out.WriteString(v + "\n")
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func toString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return ""
}

func TestNoPlaintextInPostgres(t *testing.T) {
	u := pgtest.URL(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	open := func() (backend.Driver, func() []byte) {
		schema := pgtest.Schema(t, u)
		d, err := pgstate.New(ctx, pool, &pgstate.Options{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		return d, func() []byte { return dumpSchema(t, pool, schema) }
	}
	e, de := open()
	p, dp := open()
	checkBackend(t, e, p, de, dp)
}

// dumpSchema returns every row of every table of schema, as text (bytea
// columns in hex and escaped text both checked: the text form of a row
// shows bytea as hex, so each row is also read back column by column).
func dumpSchema(t *testing.T, pool *pgxpool.Pool, schema string) []byte {
	ctx := context.Background()
	rows, err := pool.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = $1`, schema)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, n)
	}
	rows.Close()
	var out bytes.Buffer
	for _, tb := range tables {
		rows, err := pool.Query(ctx, `SELECT * FROM "`+schema+`"."`+tb+`"`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			raw := rows.RawValues()
			for _, c := range raw {
				out.Write(c)
				out.WriteByte('\n')
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out.Bytes()
}

func TestNoPlaintextInS3(t *testing.T) {
	ctx := context.Background()
	run := func(t *testing.T, opts func() s3state.Options) {
		open := func() (backend.Driver, func() []byte) {
			o := opts()
			d, err := s3state.Open(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			c := s3test.Client(t, o)
			return d, func() []byte { return dumpBucket(t, c, o.Bucket, o.Prefix) }
		}
		e, de := open()
		p, dp := open()
		checkBackend(t, e, p, de, dp)
	}
	t.Run("gofakes3", func(t *testing.T) {
		f := s3test.NewFake(t, nil)
		n := 0
		run(t, func() s3state.Options {
			n++
			return f.Options("t" + string(rune('0'+n)) + "/")
		})
	})
	t.Run("server", func(t *testing.T) {
		s3test.URL(t) // skips without STATE_TEST_S3_URL
		run(t, func() s3state.Options { return s3test.Options(t) })
	})
}

// dumpBucket returns every object under prefix.
func dumpBucket(t *testing.T, c *s3.Client, bucket, prefix string) []byte {
	ctx := context.Background()
	var out bytes.Buffer
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Contents {
			r, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: o.Key})
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(r.Body)
			r.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			out.WriteString(*o.Key + "\n")
			out.Write(b)
		}
	}
	return out.Bytes()
}

func TestNoPlaintextInDirectory(t *testing.T) {
	ctx := context.Background()
	open := func() (backend.Driver, func() []byte) {
		dir := t.TempDir()
		d, err := filestate.Open(ctx, dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		return d, func() []byte { return dumpDir(t, dir) }
	}
	e, de := open()
	p, dp := open()
	checkBackend(t, e, p, de, dp)
}

// dumpDir returns every file under dir, with its name.
func dumpDir(t *testing.T, dir string) []byte {
	var out bytes.Buffer
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		out.WriteString(path + "\n")
		out.Write(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}
