package s3state_test

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend/s3state"
	"github.com/statesidecar/state/internal/benchvs"
	"github.com/statesidecar/state/internal/s3test"
)

// BenchmarkVsRaw measures the store's fast operations against raw S3
// requests of the same size on the same server, at 1 and 32 goroutines:
//
//	STATE_TEST_S3_URL='s3://state-test?endpoint=http://127.0.0.1:7070&region=us-east-1' \
//	AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=... go test -run '^$' -bench VsRaw ./backend/s3state/
//
// The raw operation of a read is a GET of a small object. The raw
// operation of a write is a compare-and-swap of one object: at 1 goroutine
// a PUT If-Match with the ETag of the PUT before (one request), at 32 the
// same chain of PUTs shared by every goroutine, each of which reads the
// object again (GET) when another's PUT got there first: what a design of
// one object per key gets from a key every writer writes. Set/vs=PUTs
// compares the store's writes at 32 goroutines with 32 chains of PUTs on
// as many objects, each a PUT If-Match: the server's throughput for
// conditional writes that never meet. Each benchmark
// alternates ten rounds of raw requests and store operations (b.N of
// each in all), so that both see the same machine load, and reports the
// store's ns/op, the raw one's (raw-ns/op) and the store's throughput as a
// fraction of raw (x-raw), and the CPU time per operation of this process
// and, when the server listens on this machine, of the server. The store
// runs as in production: no injected clock, expiry by the server's.
func BenchmarkVsRaw(b *testing.B) {
	o := s3test.Options(b)
	for _, g := range []int{1, 32} {
		for _, bm := range []struct{ name, raw string }{
			{"Get", "GET"},
			{"Set", "CAS"},
			{"Claim", "CAS"},
			{"Acquire", "CAS"},
			{"Set/vs=PUTs", "PUTs"},
		} {
			if bm.raw == "PUTs" && g == 1 {
				continue
			}
			b.Run(bm.name+"/goroutines="+strconv.Itoa(g), func(b *testing.B) {
				op, _, _ := strings.Cut(bm.name, "/")
				st := openBench(b, o, op+strconv.Itoa(g))
				store := benchvs.StoreOp(b, st, op)
				benchvs.VsRaw(b, g, rawOp(b, o, bm.raw), store, serverPIDs(o))
			})
		}
	}
}

func openBench(b *testing.B, o s3state.Options, name string) *state.Store {
	b.Helper()
	o.Prefix += "/" + name
	d, err := s3state.Open(context.Background(), o)
	if err != nil {
		b.Fatal(err)
	}
	st, err := state.New(d, &state.Options{SweepInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	return st
}

// rawOp returns a raw GET of a small object, or one step of a
// compare-and-swap chain on one object.
func rawOp(b *testing.B, o s3state.Options, kind string) func(int64) error {
	c := s3test.Client(b, o)
	ctx := context.Background()
	key := o.Prefix + "/raw-" + kind
	body := []byte(`{"n":1}`)
	put, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &o.Bucket, Key: &key, Body: bytes.NewReader(body)})
	if err != nil {
		b.Fatal(err)
	}
	if kind == "PUTs" {
		return parallelChains(b, c, o, body)
	}
	if kind == "GET" {
		return func(int64) error {
			out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: &o.Bucket, Key: &key})
			if err != nil {
				return err
			}
			_, err = new(bytes.Buffer).ReadFrom(out.Body)
			out.Body.Close()
			return err
		}
	}
	var mu sync.Mutex
	tag := aws.ToString(put.ETag)
	return func(int64) error {
		mu.Lock()
		t := tag
		mu.Unlock()
		for {
			out, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &o.Bucket, Key: &key, Body: bytes.NewReader(body), IfMatch: &t})
			if err == nil {
				mu.Lock()
				tag = aws.ToString(out.ETag)
				mu.Unlock()
				return nil
			}
			var ae smithy.APIError
			if !errors.As(err, &ae) || (ae.ErrorCode() != "PreconditionFailed" && ae.ErrorCode() != "ConditionalRequestConflict") {
				return err
			}
			h, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &o.Bucket, Key: &key})
			if err != nil {
				return err
			}
			t = aws.ToString(h.ETag)
		}
	}
}

// parallelChains returns a step of one of 32 compare-and-swap chains, each
// on an object of its own, chosen by the operation's number.
func parallelChains(b *testing.B, c *s3.Client, o s3state.Options, body []byte) func(int64) error {
	type chain struct {
		mu  sync.Mutex
		key string
		tag string
	}
	chains := make([]*chain, 32)
	for i := range chains {
		key := o.Prefix + "/raw-chain-" + strconv.Itoa(i)
		out, err := c.PutObject(context.Background(), &s3.PutObjectInput{Bucket: &o.Bucket, Key: &key, Body: bytes.NewReader(body)})
		if err != nil {
			b.Fatal(err)
		}
		chains[i] = &chain{key: key, tag: aws.ToString(out.ETag)}
	}
	return func(i int64) error {
		ch := chains[i%32]
		ch.mu.Lock()
		defer ch.mu.Unlock()
		out, err := c.PutObject(context.Background(), &s3.PutObjectInput{Bucket: &o.Bucket, Key: &ch.key, Body: bytes.NewReader(body), IfMatch: &ch.tag})
		if err != nil {
			return err
		}
		ch.tag = aws.ToString(out.ETag)
		return nil
	}
}

// serverPIDs returns the process that listens on the port of o's endpoint
// on this machine (Linux: the listening socket in /proc/net/tcp and the
// process holding it), so that its CPU time is counted; nil when it cannot
// tell.
func serverPIDs(o s3state.Options) func() []int {
	u, err := url.Parse(o.Endpoint)
	if err != nil || u.Port() == "" {
		return nil
	}
	port, _ := strconv.Atoi(u.Port())
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return nil
	}
	inode := ""
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 10 || f[3] != "0A" { // 0A: listening
			continue
		}
		if _, p, ok := strings.Cut(f[1], ":"); ok {
			if n, err := strconv.ParseInt(p, 16, 32); err == nil && int(n) == port {
				inode = f[9]
			}
		}
	}
	if inode == "" {
		return nil
	}
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range fds {
		if target, err := os.Readlink(fd); err == nil && target == "socket:["+inode+"]" {
			pid, _ := strconv.Atoi(strings.Split(fd, "/")[2])
			return func() []int { return []int{pid} }
		}
	}
	return nil
}
