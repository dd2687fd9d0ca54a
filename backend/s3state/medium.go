package s3state

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/statesidecar/state/backend/objstate"
)

// medium is an objstate.Medium over an S3 bucket: conditional writes are
// PUTs with If-None-Match: * or If-Match: <ETag>, the cheap check that a
// copy is current a GET with If-None-Match (304 Not Modified), and the
// clock the server's (serverClock). It never sends a conditional DELETE.
type medium struct {
	c      *s3.Client
	bucket string
	clock  *serverClock
	stop   context.CancelFunc
	wg     sync.WaitGroup
	rtt    time.Duration // of the first request, for the clock's probes
	// transport is the client's transport when the medium made it (and
	// closes its idle connections on Close).
	transport *http.Transport
	// notMD5 is set once a write's ETag is not the MD5 of what it wrote
	// (SSE-KMS): reads can then not be checked (see Read).
	notMD5 atomic.Bool
}

func (m *medium) Name() string { return "s3" }

// clockMiddleware feeds the Date header of every answer to the clock.
func clockMiddleware(c *serverClock) func(*middleware.Stack) error {
	return func(st *middleware.Stack) error {
		return st.Deserialize.Add(middleware.DeserializeMiddlewareFunc("StateServerClock",
			func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
				sent := time.Now()
				out, md, err := next.HandleDeserialize(ctx, in)
				if resp, ok := out.RawResponse.(*smithyhttp.Response); ok && resp != nil {
					c.observe(sent, time.Now(), resp.Header.Get("Date"))
				}
				return out, md, err
			}), middleware.After)
	}
}

// classify turns an S3 client error into the medium's: ctx's own error
// when ctx ended, ErrNotExist, ErrUnchanged, ErrConditionFailed, an error
// matching ErrTransient when the request may be tried again (or may have
// been carried out), or the error as it is.
func classify(ctx context.Context, err error, what string) error {
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil && errors.Is(err, cerr) {
		return cerr
	}
	status := 0
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	code := ""
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	switch {
	case status == http.StatusNotModified:
		return objstate.ErrUnchanged
	case status == http.StatusPreconditionFailed:
		return objstate.ErrConditionFailed
	case status == http.StatusNotFound || code == "NoSuchKey":
		return objstate.ErrNotExist
	case status == http.StatusConflict, status == http.StatusRequestTimeout, status == http.StatusTooManyRequests,
		status >= 500, status == 0 && sendFailed(err):
		// 409 is ConditionalRequestConflict: another conditional write
		// of the key is under way. A failed send: no answer (a refused
		// or broken connection), so the request may have been carried
		// out.
		return fmt.Errorf("%w: %s: %w", objstate.ErrTransient, what, err)
	}
	return fmt.Errorf("s3state: %s: %w", what, err)
}

// sendFailed reports whether err says that a request or its answer was
// lost on the way.
func sendFailed(err error) bool {
	var se *smithyhttp.RequestSendError
	var ne net.Error
	return errors.As(err, &se) || errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

// Read checks that the ETag it got is the MD5 of the bytes it got, and
// reads again when it is not: versitygw v1.8.0 can answer a GET racing a
// PUT of the same object with the old bytes and the new ETag, for as long
// as the PUT takes to finish (seen here: without the check,
// compare-and-swap increments by 16 goroutines lost more than half their
// updates, each PUT If-Match of the new ETag carrying a value computed
// from the old bytes). A server whose ETags are not MD5s (AWS with
// SSE-KMS) is recognised by the ETag of a write, and its reads are then
// taken as they come.
func (m *medium) Read(ctx context.Context, key, ifNoneMatch string) (objstate.Object, error) {
	wait := time.Millisecond
	for range tornRetries {
		obj, err := m.read(ctx, key, ifNoneMatch)
		if err != nil || m.notMD5.Load() || isMD5Of(obj.Tag, obj.Data) {
			return obj, err
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return objstate.Object{}, ctx.Err()
		}
		wait = min(2*wait, 50*time.Millisecond)
	}
	// Never a match: perhaps this server's ETags are not MD5s, which a
	// write tells.
	if err := m.probeETags(ctx, key); err != nil {
		return objstate.Object{}, err
	}
	if m.notMD5.Load() {
		return m.read(ctx, key, ifNoneMatch)
	}
	return objstate.Object{}, fmt.Errorf("%w: reading %s: the ETag never matched the bytes", objstate.ErrTransient, key)
}

// tornRetries bounds the reads of one object whose ETag does not match
// its bytes (about half a second in all).
const tornRetries = 16

// probeETags writes a small object beside key to learn whether the
// server's ETags are MD5s.
func (m *medium) probeETags(ctx context.Context, key string) error {
	probe := key + ".etag-probe"
	if _, err := m.Write(ctx, probe, []byte("etag probe"), objstate.Cond{}); err != nil {
		return err
	}
	return m.Delete(ctx, probe)
}

// isMD5Of reports whether etag is the quoted hex MD5 of b, or is not an MD5
// at all (a multipart ETag has a dash), which cannot be checked.
func isMD5Of(etag string, b []byte) bool {
	t := strings.Trim(etag, `"`)
	if len(t) != 2*md5.Size || strings.Contains(t, "-") {
		return true
	}
	sum := md5.Sum(b)
	return strings.EqualFold(t, hex.EncodeToString(sum[:]))
}

func (m *medium) read(ctx context.Context, key, ifNoneMatch string) (objstate.Object, error) {
	in := &s3.GetObjectInput{Bucket: &m.bucket, Key: &key}
	if ifNoneMatch != "" {
		in.IfNoneMatch = &ifNoneMatch
	}
	out, err := m.c.GetObject(ctx, in)
	if err != nil {
		return objstate.Object{}, classify(ctx, err, "reading "+key)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		if ctx.Err() == nil {
			return objstate.Object{}, fmt.Errorf("%w: reading %s: %w", objstate.ErrTransient, key, err)
		}
		return objstate.Object{}, ctx.Err()
	}
	tag := aws.ToString(out.ETag)
	if ifNoneMatch != "" && tag == ifNoneMatch { // a server that ignored If-None-Match
		return objstate.Object{}, objstate.ErrUnchanged
	}
	return objstate.Object{Data: b, Tag: tag}, nil
}

func (m *medium) Write(ctx context.Context, key string, data []byte, c objstate.Cond) (string, error) {
	in := &s3.PutObjectInput{Bucket: &m.bucket, Key: &key, Body: bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))), ContentType: aws.String("application/json")}
	if c.IfAbsent {
		in.IfNoneMatch = aws.String("*")
	}
	if c.IfMatch != "" {
		in.IfMatch = &c.IfMatch
	}
	out, err := m.c.PutObject(ctx, in)
	if err != nil {
		err = classify(ctx, err, "writing "+key)
		if errors.Is(err, objstate.ErrNotExist) && c.IfMatch != "" {
			return "", objstate.ErrConditionFailed // AWS answers If-Match on a missing key with 404
		}
		return "", err
	}
	tag := aws.ToString(out.ETag)
	if !isMD5Of(tag, data) {
		m.notMD5.Store(true)
	}
	return tag, nil
}

func (m *medium) Delete(ctx context.Context, key string) error {
	_, err := m.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &m.bucket, Key: &key})
	if err = classify(ctx, err, "deleting "+key); errors.Is(err, objstate.ErrNotExist) {
		return nil
	}
	return err
}

func (m *medium) List(ctx context.Context, prefix string, fn func(objstate.ObjectInfo) bool) error {
	p := s3.NewListObjectsV2Paginator(m.c, &s3.ListObjectsV2Input{Bucket: &m.bucket, Prefix: &prefix})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return classify(ctx, err, "listing "+prefix)
		}
		for _, o := range page.Contents {
			if !fn(objstate.ObjectInfo{Key: aws.ToString(o.Key), Modified: aws.ToTime(o.LastModified), Size: aws.ToInt64(o.Size)}) {
				return nil
			}
		}
	}
	return nil
}

// Now is the server's clock, as estimated from its answers.
func (m *medium) Now() time.Time { return m.clock.now() }

// Uncertainty returns how far Now may be from the server's clock.
func (m *medium) Uncertainty() time.Duration { return m.clock.uncertainty() }

func (m *medium) Close() error {
	m.stop()
	m.wg.Wait()
	if m.transport != nil {
		m.transport.CloseIdleConnections()
	}
	return nil
}

// probe asks the server anything (HEAD of the bucket) for its Date, and
// returns how long the round trip took.
func (m *medium) probe(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	_, err := m.c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &m.bucket})
	return time.Since(start), err
}

// calibrateNow narrows the clock's interval to about a twentieth of a
// second within one second: twenty requests a twentieth of a second apart,
// one of which sees the server's clock turn a second. Open uses it when the
// first answer shows the server's clock is not the machine's.
func (m *medium) calibrateNow(ctx context.Context) {
	start := time.Now()
	for i := range 21 {
		if d := time.Until(start.Add(time.Duration(i) * 50 * time.Millisecond)); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
		}
		if _, err := m.probe(ctx); err != nil {
			return
		}
	}
}

// calibrate narrows the clock's interval with requests timed to reach the
// server as its clock turns a second (by the estimate so far), a few at
// once when Open returns and one a minute after, until ctx ends.
func (m *medium) calibrate(ctx context.Context) {
	defer m.wg.Done()
	wait := func(until time.Time) bool {
		t := time.NewTimer(time.Until(until))
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-ctx.Done():
			return false
		}
	}
	rtt := m.rtt
	for n := 0; ; n++ {
		if (n >= 8 || m.clock.uncertainty() < max(rtt, 2*time.Millisecond)) && !wait(time.Now().Add(time.Minute)) {
			return
		}
		if !wait(m.clock.nextProbe(rtt)) {
			return
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if d, err := m.probe(rctx); err == nil {
			rtt = (3*rtt + d) / 4
		}
		cancel()
	}
}

// transport is the HTTP transport of a medium's client: enough idle
// connections for the reads a namespace makes at once and for many
// namespaces.
func transport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 512
	t.MaxIdleConnsPerHost = 256
	t.DialContext = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	return t
}
