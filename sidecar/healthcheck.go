package sidecar

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// errUnhealthy is the healthcheck command's failure (exit status 1).
var errUnhealthy = errors.New("unhealthy")

// healthcheck is the healthcheck command: it asks the sidecar serving on
// this host for /readyz (with -live, /healthz) and succeeds when it answers
// 200 within the timeout. It reads SIDECAR_HOST and SIDECAR_PORT and takes
// the serve command's flags, so that it finds the server it runs beside: a
// wildcard bind (0.0.0.0, ::) is asked on loopback. Distroless images have
// no shell or curl: this is their container health check and Kubernetes
// exec probe, which also works for a sidecar bound to 127.0.0.1, where the
// kubelet's HTTP probes cannot reach.
func healthcheck(ctx context.Context, args []string, env Env) error {
	l := newLoader(Name+" healthcheck", env.LookupEnv, env.Stdout, nil)
	l.usage = func(w io.Writer) {
		fmt.Fprintf(w, "Usage: %s healthcheck [-live] [-timeout-seconds n] [serve flags]\n"+
			"Exit status 0 when the sidecar on SIDECAR_HOST:SIDECAR_PORT answers /readyz (-live: /healthz) with 200, 1 otherwise.\n", Name)
	}
	live := l.fs.Bool("live", false, "ask /healthz (the process serves) instead of /readyz (the backend answers)")
	timeout := l.fs.Float64("timeout-seconds", 3, "how long to wait for the answer")
	if err := l.parse(args); err != nil {
		return err
	}
	for _, b := range l.bad {
		if b.s.env == "SIDECAR_HOST" || b.s.env == "SIDECAR_PORT" {
			return fmt.Errorf("%w: %s: %v", ErrConfig, b.source, b.err)
		}
	}
	if *timeout <= 0 {
		return fmt.Errorf("%w: -timeout-seconds must be positive", ErrConfig)
	}
	host := l.c.Host
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	path := "/readyz"
	if *live {
		path = "/healthz"
	}
	url := "http://" + net.JoinHostPort(host, strconv.Itoa(l.c.Port)) + path
	ctx, cancel := context.WithTimeout(ctx, time.Duration(*timeout*float64(time.Second)))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrConfig, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", errUnhealthy, url, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: %s answered %s", errUnhealthy, url, resp.Status)
	}
	return nil
}
