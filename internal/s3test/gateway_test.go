package s3test_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/internal/s3test"
	"github.com/statesidecar/state/internal/skipnote"
	"github.com/statesidecar/state/internal/storetest"
)

// TestMain forgets any S3 URL of the environment, so that the tests go
// through the gateway the helper starts from EnvGateway, and stops it.
func TestMain(m *testing.M) {
	if os.Getenv(s3test.EnvGateway) != "" {
		_ = os.Unsetenv(s3test.EnvURL)
	}
	code := skipnote.Run(m)
	s3test.StopGateway()
	os.Exit(code)
}

// TestGatewayServesTheStore has the helper start versitygw, then checks
// that it is a real S3 server with conditional writes, and that a store
// over it keeps what it acknowledged.
func TestGatewayServesTheStore(t *testing.T) {
	if os.Getenv(s3test.EnvGateway) == "" {
		skipnote.Note(s3test.EnvGateway, "versitygw helper")
		t.Skipf("set %s to a versitygw v1.8.0 binary to have the tests start one", s3test.EnvGateway)
	}
	o := s3test.Options(t)
	if os.Getenv(s3test.EnvURL) == "" {
		t.Fatalf("the helper did not set %s", s3test.EnvURL)
	}
	ctx := context.Background()
	c := s3test.Client(t, o)
	key := o.Prefix + "/once"
	put := func() error {
		_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &o.Bucket, Key: &key,
			Body: bytes.NewReader([]byte("x")), IfNoneMatch: new(string("*"))})
		return err
	}
	if err := put(); err != nil {
		t.Fatalf("first create-if-absent: %v", err)
	}
	var ae smithy.APIError
	if err := put(); !errors.As(err, &ae) || ae.ErrorCode() != "PreconditionFailed" {
		t.Fatalf("second create-if-absent: want PreconditionFailed, got %v", err)
	}

	st := storetest.Open(t, s3test.URL(t), &state.Options{SweepInterval: -1})
	for i := range 3 {
		if _, err := st.Set(ctx, fmt.Sprint("k", i), i); err != nil {
			t.Fatal(err)
		}
	}
	if e, err := st.Get(ctx, "k2"); err != nil || string(e.Value) != "2" {
		t.Fatalf("Get k2 = %s, %v; want 2", e.Value, err)
	}
}
