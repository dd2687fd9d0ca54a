// Package s3test helps the tests of the S3 backend: it reads the S3 URL
// tests run against (STATE_TEST_S3_URL) and gives each test a prefix of
// its own, deleted afterwards; starts gofakes3 in the test's process for
// fast tests; and, given a versitygw binary (EnvGateway), starts a
// throwaway gateway (a real S3 server) on a spare loopback port.
package s3test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/statesidecar/state/backend/s3state"
	"github.com/statesidecar/state/internal/skipnote"
)

// EnvURL names the variable holding the S3 URL the tests use, of the form
// the store opens: s3://BUCKET/PREFIX?endpoint=http://127.0.0.1:PORT&region=us-east-1,
// with credentials in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY. Tests
// needing it skip when it is unset (unless EnvGateway names a versitygw to
// start); .ci/run starts a versitygw and sets it.
const EnvURL = "STATE_TEST_S3_URL"

// Wait bounds every wait for a server.
const Wait = 60 * time.Second

// URL returns EnvURL with a prefix of the test's own under the URL's
// (deleted when the test ends), creating the bucket if it is missing, or
// skips the test.
func URL(t testing.TB) string {
	t.Helper()
	u := OptionalURL(t)
	if u == "" {
		t.Skipf("set %s (e.g. s3://state-test?endpoint=http://127.0.0.1:7070&region=us-east-1, with "+
			"AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; .ci/run starts a versitygw and sets it), or %s "+
			"to a versitygw binary for the tests to start one, to run the S3 tests", EnvURL, EnvGateway)
	}
	return u
}

// OptionalURL is URL, returning "" (and logging why) when EnvURL is unset
// instead of skipping.
func OptionalURL(t testing.TB) string {
	t.Helper()
	raw := os.Getenv(EnvURL)
	if raw == "" && os.Getenv(EnvGateway) != "" {
		if err := ensureGateway(); err != nil {
			t.Fatal(err)
		}
		raw = os.Getenv(EnvURL)
	}
	if raw == "" {
		skipnote.Note(EnvURL, "S3")
		t.Logf("the S3 server cases are skipped: set %s to run them", EnvURL)
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("%s: %v", EnvURL, err)
	}
	o, err := s3state.ParseURL(u)
	if err != nil {
		t.Fatalf("%s: %v", EnvURL, err)
	}
	c := Client(t, o)
	EnsureBucket(t, c, o.Bucket)
	prefix := strings.TrimSuffix(o.Prefix, "/")
	if prefix != "" {
		prefix += "/"
	}
	prefix += "t-" + randHex()
	u.Path = "/" + prefix
	t.Cleanup(func() { Purge(t, c, o.Bucket, prefix+"/") })
	return u.String()
}

// Options returns the s3state options of URL(t).
func Options(t testing.TB) s3state.Options {
	t.Helper()
	u, err := url.Parse(URL(t))
	if err != nil {
		t.Fatal(err)
	}
	o, err := s3state.ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func randHex() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Client returns a plain S3 client for the server of o, with the
// environment's credentials (any, if it has none: gofakes3 and a local
// versitygw ignore them or were started with them). Its idle connections
// are closed when t ends.
func Client(t testing.TB, o s3state.Options) *s3.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	t.Cleanup(tr.CloseIdleConnections)
	creds := o.Credentials
	if creds == nil {
		ak, sk := os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
		if ak == "" {
			ak, sk = "test", "test"
		}
		creds = credentials.NewStaticCredentialsProvider(ak, sk, "")
	}
	region := o.Region
	if region == "" {
		region = "us-east-1"
	}
	return s3.New(s3.Options{Region: region, Credentials: creds, UsePathStyle: o.Endpoint != "" || o.PathStyle,
		HTTPClient:                 &http.Client{Transport: tr},
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired},
		func(so *s3.Options) {
			if o.Endpoint != "" {
				so.BaseEndpoint = aws.String(o.Endpoint)
			}
		})
}

// EnsureBucket creates bucket unless it exists.
func EnsureBucket(t testing.TB, c *s3.Client, bucket string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	if _, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &bucket}); err == nil {
		return
	}
	_, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &bucket})
	var owned interface{ ErrorCode() string }
	if err != nil && !(errors.As(err, &owned) && (owned.ErrorCode() == "BucketAlreadyOwnedByYou" || owned.ErrorCode() == "BucketAlreadyExists")) {
		t.Fatalf("creating bucket %s: %v", bucket, err)
	}
}

// Purge deletes every object under prefix.
func Purge(t testing.TB, c *s3.Client, bucket, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*Wait)
	defer cancel()
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: &prefix})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Logf("purging s3://%s/%s: %v", bucket, prefix, err)
			return
		}
		for _, o := range page.Contents {
			if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: o.Key}); err != nil {
				t.Logf("purging s3://%s/%s: %v", bucket, aws.ToString(o.Key), err)
				return
			}
		}
	}
}

// Fake is a gofakes3 server in the test's process, with one bucket.
type Fake struct {
	// Server is the HTTP server; its handler may be wrapped (Wrap).
	Server *httptest.Server
	Bucket string
}

// NewFake starts a gofakes3 server with a bucket, closed when t ends. wrap,
// if not nil, wraps its handler (to skew its clock, say).
func NewFake(t testing.TB, wrap func(h http.Handler) http.Handler) *Fake {
	t.Helper()
	var h http.Handler = gofakes3.New(s3mem.New(), gofakes3.WithTimeSkewLimit(0)).Server()
	if wrap != nil {
		h = wrap(h)
	}
	f := &Fake{Server: httptest.NewServer(h), Bucket: "state-test"}
	t.Cleanup(f.Server.Close)
	EnsureBucket(t, Client(t, f.Options("")), f.Bucket)
	return f
}

// Options returns the s3state options of the fake's bucket under prefix,
// with credentials that it accepts.
func (f *Fake) Options(prefix string) s3state.Options {
	return s3state.Options{Bucket: f.Bucket, Prefix: prefix, Endpoint: f.Server.URL, Region: "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")}
}

// URL returns the s3:// URL of the fake's bucket under prefix. Processes
// opening it need credentials in the environment (any will do): SetEnv.
func (f *Fake) URL(prefix string) string {
	u := url.URL{Scheme: "s3", Host: f.Bucket, Path: "/" + prefix,
		RawQuery: url.Values{"endpoint": {f.Server.URL}, "region": {"us-east-1"}}.Encode()}
	return u.String()
}

// SetEnv gives the test's process, and the processes it starts,
// credentials for the fake, unless the environment has some.
func SetEnv(t *testing.T) {
	if os.Getenv("AWS_ACCESS_KEY_ID") == "" {
		t.Setenv("AWS_ACCESS_KEY_ID", "test")
		t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	}
}
