package s3state_test

import (
	"context"
	"fmt"
	"log"
	"net/http/httptest"
	"net/url"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend/s3state"
)

// A store in an S3 bucket, here on gofakes3 in this process; on AWS, give
// the bucket and its region, and credentials in the environment.
func ExampleOpen() {
	ctx := context.Background()
	srv := httptest.NewServer(gofakes3.New(s3mem.New(), gofakes3.WithAutoBucket(true)).Server())
	defer srv.Close()

	d, err := s3state.Open(ctx, s3state.Options{
		Bucket: "agents", Prefix: "team-a", Endpoint: srv.URL, Region: "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("key", "secret", ""),
	})
	if err != nil {
		log.Fatal(err)
	}
	st, _ := state.New(d, nil)
	defer st.Close()
	run, _ := st.CreateRun(ctx, "review", nil)
	if _, err := st.ClaimRun(ctx, run.ID, "agent-1"); err != nil {
		log.Fatal(err)
	}
	_, err = st.ClaimRun(ctx, run.ID, "agent-2")
	fmt.Println(st.Backend(), err != nil)
	// Output: s3 true
}

// ParseURL reads the URL form the store opens with state.Open.
func ExampleParseURL() {
	o, err := s3state.ParseURL(mustParse("s3://agents/team-a?endpoint=http://127.0.0.1:7070&region=us-east-1"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(o.Bucket, o.Prefix, o.Endpoint, o.Region)
	// Output: agents team-a http://127.0.0.1:7070 us-east-1
}

func mustParse(raw string) *url.URL {
	u, err := url.Parse(raw)
	if err != nil {
		panic(err)
	}
	return u
}
