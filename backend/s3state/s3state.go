// Package s3state is the S3 backend of package state: the store lives in
// a bucket of Amazon S3 or of any server that keeps S3's conditional
// writes (If-None-Match and If-Match on PUT), so that agents that have an
// object store and nothing else to run share durable coordination state.
//
// It is package objstate's design on S3; see that package for how commits,
// caches and snapshots work and what a call costs in requests. In short:
// one namespace is a head object written by compare-and-swap on its ETag
// (PUT If-Match), holding the newest commits, plus immutable segment and
// snapshot objects; a commit is one conditional PUT shared by every call
// waiting at the time (group commit), a read one GET If-None-Match that
// answers 304 while nothing changed, shared the same way. No request is a
// conditional DELETE, which not every S3 server makes atomic.
//
// # Time
//
// Expiry follows the S3 server's clock, so that every process sharing the
// bucket agrees on when a lease or a claim runs out: each process
// estimates the server's clock from the Date header of its answers (see
// serverClock) to within about a round trip, and the driver implements
// backend.ServerClock with that estimate. A server whose clock is not
// the machine's (as far as its first answer tells) costs Open about a
// second of timed requests, to know its clock to about a twentieth of a
// second from the start.
//
// # Credentials and URLs
//
// Credentials come from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
// AWS_SESSION_TOKEN, or else from the shared credentials file
// (AWS_SHARED_CREDENTIALS_FILE, or ~/.aws/credentials) and its profile
// AWS_PROFILE (or "default"). The region comes from the URL, AWS_REGION or
// AWS_DEFAULT_REGION, and defaults to us-east-1.
//
// It registers the "s3" URL scheme: "s3://bucket/prefix?region=eu-west-1"
// for AWS, "s3://bucket/prefix?endpoint=http://127.0.0.1:7070" for another
// server (path-style addressing whenever an endpoint is given). The prefix
// is optional; several stores can share a bucket under different ones.
package s3state

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/backend/objstate"
)

// Options configure Open.
type Options struct {
	// Bucket is the bucket's name; it must exist.
	Bucket string
	// Prefix is where the store lives in the bucket: "" or a path (a "/"
	// is added at its end if missing).
	Prefix string
	// Region is the bucket's region; "" reads AWS_REGION and
	// AWS_DEFAULT_REGION, and defaults to us-east-1.
	Region string
	// Endpoint is the URL of an S3 server other than AWS's, such as
	// http://127.0.0.1:7070; it implies path-style addressing.
	Endpoint string
	// PathStyle asks for path-style addressing (bucket in the path) with
	// AWS's endpoints.
	PathStyle bool
	// Credentials, if set, replaces the credentials of the environment and
	// the shared file.
	Credentials aws.CredentialsProvider
	// HTTPClient, if set, replaces the client's own.
	HTTPClient *http.Client
	// Driver tunes the object-store driver (its Prefix is Prefix).
	Driver objstate.Options
}

// Open opens the store in bucket o.Bucket under o.Prefix, after checking
// that the bucket can be reached with the credentials.
func Open(ctx context.Context, o Options) (*objstate.Driver, error) {
	if o.Bucket == "" {
		return nil, errors.New("s3state: the bucket must be given")
	}
	if o.Prefix != "" && !strings.HasSuffix(o.Prefix, "/") {
		o.Prefix += "/"
	}
	region := firstOf(o.Region, os.Getenv("AWS_REGION"), os.Getenv("AWS_DEFAULT_REGION"), "us-east-1")
	creds := o.Credentials
	if creds == nil {
		var err error
		if creds, err = environmentCredentials(); err != nil {
			return nil, err
		}
	}
	clk := &serverClock{}
	hc := o.HTTPClient
	var own *http.Transport
	if hc == nil {
		own = transport()
		hc = &http.Client{Transport: own}
	}
	c := s3.New(s3.Options{
		Region:                     region,
		Credentials:                creds,
		HTTPClient:                 hc,
		Retryer:                    aws.NopRetryer{}, // the driver retries, knowing which writes may have landed
		UsePathStyle:               o.PathStyle || o.Endpoint != "",
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
		APIOptions:                 []func(*middleware.Stack) error{clockMiddleware(clk)},
	}, func(so *s3.Options) {
		if o.Endpoint != "" {
			so.BaseEndpoint = aws.String(o.Endpoint)
		}
	})
	life, stop := context.WithCancel(context.Background())
	m := &medium{c: c, bucket: o.Bucket, clock: clk, stop: stop, transport: own}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	rtt, err := m.probe(pctx)
	cancel()
	if err != nil {
		stop()
		return nil, fmt.Errorf("s3state: bucket %q cannot be reached: %w", o.Bucket, classify(ctx, err, "checking the bucket"))
	}
	m.rtt = rtt
	if clk.skewed() {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		m.calibrateNow(cctx)
		cancel()
	}
	m.wg.Add(1)
	go m.calibrate(life)
	dopts := o.Driver
	dopts.Prefix = o.Prefix
	d, err := objstate.New(m, &dopts)
	if err != nil {
		_ = m.Close()
		return nil, err
	}
	return d, nil
}

func firstOf(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// Scheme is the URL scheme s3state registers its URLOpener under.
const Scheme = "s3"

func init() { state.Register(Scheme, URLOpener{}) }

// URLOpener opens "s3://bucket/prefix" URLs. The query parameters region,
// endpoint and path_style (true or false) set the Options of the same
// names; others are rejected.
type URLOpener struct{}

var _ state.URLOpener = URLOpener{}

// OpenDriverURL implements state.URLOpener.
func (URLOpener) OpenDriverURL(ctx context.Context, u *url.URL) (backend.Driver, error) {
	o, err := ParseURL(u)
	if err != nil {
		return nil, err
	}
	return Open(ctx, o)
}

// ParseURL returns the Options an s3:// URL stands for.
func ParseURL(u *url.URL) (Options, error) {
	if u.User != nil {
		return Options{}, errors.New("s3state: credentials do not go in the URL: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
	}
	o := Options{Bucket: u.Host, Prefix: strings.TrimPrefix(u.Path, "/")}
	if o.Bucket == "" {
		return o, fmt.Errorf("s3state: URL %q names no bucket: use s3://bucket/prefix", u.Redacted())
	}
	for k, vs := range u.Query() {
		v := vs[len(vs)-1]
		switch k {
		case "region":
			o.Region = v
		case "endpoint":
			e, err := url.Parse(v)
			if err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" {
				return o, fmt.Errorf("s3state: URL parameter endpoint must be an http:// or https:// URL, got %q", v)
			}
			o.Endpoint = v
		case "path_style":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return o, fmt.Errorf("s3state: URL parameter path_style must be true or false, got %q", v)
			}
			o.PathStyle = b
		default:
			return o, fmt.Errorf("s3state: unknown URL parameter %q (known: region, endpoint, path_style)", k)
		}
	}
	return o, nil
}

// environmentCredentials reads the standard variables, or else the shared
// credentials file.
func environmentCredentials() (aws.CredentialsProvider, error) {
	ak := firstOf(os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_ACCESS_KEY"))
	sk := firstOf(os.Getenv("AWS_SECRET_ACCESS_KEY"), os.Getenv("AWS_SECRET_KEY"))
	if ak != "" && sk != "" {
		return credentials.NewStaticCredentialsProvider(ak, sk, os.Getenv("AWS_SESSION_TOKEN")), nil
	}
	path := os.Getenv("AWS_SHARED_CREDENTIALS_FILE")
	if path == "" {
		home, err := os.UserHomeDir()
		if err == nil {
			path = home + "/.aws/credentials"
		}
	}
	profile := firstOf(os.Getenv("AWS_PROFILE"), "default")
	ak, sk, token, err := sharedCredentials(path, profile)
	if err != nil {
		return nil, err
	}
	if ak == "" || sk == "" {
		return nil, errors.New("s3state: no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or write them in ~/.aws/credentials")
	}
	return credentials.NewStaticCredentialsProvider(ak, sk, token), nil
}

// sharedCredentials reads one profile of a shared credentials file (an INI
// file); a missing file gives no credentials and no error.
func sharedCredentials(path, profile string) (ak, sk, token string, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) || path == "" {
		return "", "", "", nil
	}
	if err != nil {
		return "", "", "", fmt.Errorf("s3state: reading the shared credentials file: %w", err)
	}
	in := false
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			in = strings.TrimSpace(line[1:len(line)-1]) == profile
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !in || !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "aws_access_key_id":
			ak = strings.TrimSpace(v)
		case "aws_secret_access_key":
			sk = strings.TrimSpace(v)
		case "aws_session_token":
			token = strings.TrimSpace(v)
		}
	}
	return ak, sk, token, nil
}
