package pgstate_test

import (
	"context"
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend/pgstate"
	"github.com/statesidecar/state/internal/pgtest"
)

// TestOpenURL opens stores through state.Open with both schemes and the
// driver's parameters.
func TestOpenURL(t *testing.T) {
	is := is.New(t)
	u := pgtest.URL(t)
	schema := pgtest.Schema(t, u)
	for _, scheme := range []string{"postgres", "postgresql"} {
		v := strings.Replace(pgtest.WithParams(t, u, "schema="+schema, "timeout=5s", "namespace=app", "pool_max_conns=3"),
			"postgres://", scheme+"://", 1)
		st, err := state.Open(ctx, v)
		is.NoErr(err)
		is.Equal(st.Backend(), "postgres")
		is.Equal(st.NamespaceName(), "app")
		d := st.Driver().(*pgstate.Driver)
		is.Equal(d.Schema(), schema)                   // the schema parameter picks the schema
		is.Equal(d.Pool().Config().MaxConns, int32(3)) // pgxpool's parameters reach the pool
		_, err = st.Set(ctx, "k", scheme)
		is.NoErr(err)
		is.NoErr(st.Close())
	}
	for _, bad := range []struct{ param, want string }{
		{"schema=a-b", "schema"},
		{"schema=", "schema"},
		{"timeout=soon", "timeout"},
		{"listen=", "listen"},
		{"listen=" + url.QueryEscape("postgres://x/db?sslmode=sometimes"), "listen"},
		{"no_such_setting=1", "no_such_setting"}, // pgx sends it to the server, which refuses it
	} {
		_, err := state.Open(ctx, pgtest.WithParams(t, u, bad.param))
		is.True(err != nil) // an unknown or malformed parameter fails the open
		t.Logf("%s: %v", bad.param, err)
		is.True(strings.Contains(err.Error(), bad.want)) // naming the parameter
	}
}

// TestErrorsDoNotLeakPasswords opens URLs that carry a password and fail
// in every way an open can fail: none of the errors repeats the password.
func TestErrorsDoNotLeakPasswords(t *testing.T) {
	is := is.New(t)
	const secret = "Sup3r-s3cret"
	l, err := net.Listen("tcp", "127.0.0.1:0")
	is.NoErr(err)
	port := l.Addr().(*net.TCPAddr).Port
	is.NoErr(l.Close())
	cctx, cancel := context.WithTimeout(ctx, pgtest.Wait)
	defer cancel()
	for _, u := range []string{
		"postgres://app:" + secret + "@127.0.0.1:" + strconv.Itoa(port) + "/db?sslmode=disable", // nobody listens
		"postgres://app:" + secret + "@127.0.0.1:notaport/db",                                   // malformed
		"postgres://app:" + secret + "@127.0.0.1:5432/db?sslmode=bogus",                         // bad parameter
		"postgres://app:" + secret + "@[::1/db",                                                 // not a URL
		"postgres://app:" + secret + "@127.0.0.1:5432/db?schema=bad-name",                       // bad schema
		"host=127.0.0.1 port=5432 user=app password=" + secret + " sslmode=bogus",               // key=value, bad parameter
		"host=127.0.0.1 port=" + strconv.Itoa(port) + " user=app password='" + secret + "'",     // key=value, nobody listens
	} {
		if strings.HasPrefix(u, "postgres://") {
			_, err := state.Open(cctx, u)
			is.True(err != nil)
			t.Log(err)
			is.True(!strings.Contains(err.Error(), secret)) // an error never shows the password
		}
		_, err := pgstate.Open(cctx, u, nil)
		is.True(err != nil)
		t.Log(err)
		is.True(!strings.Contains(err.Error(), secret)) // nor does the driver's own Open
	}
	is.True(cctx.Err() == nil) // and they fail promptly
}

// TestOpenOfUnreachableServerFailsPromptly checks that Open reports a server
// that is not there, naming it, rather than returning a driver that fails
// later.
func TestOpenOfUnreachableServerFailsPromptly(t *testing.T) {
	is := is.New(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	is.NoErr(err)
	addr := l.Addr().String()
	is.NoErr(l.Close())
	cctx, cancel := context.WithTimeout(ctx, pgtest.Wait)
	defer cancel()
	start := time.Now()
	_, err = pgstate.Open(cctx, "postgres://postgres@"+addr+"/test", nil)
	is.True(err != nil)
	is.True(cctx.Err() == nil) // promptly
	is.True(strings.Contains(err.Error(), addr))
	t.Logf("%v (after %v)", err, time.Since(start))
}
