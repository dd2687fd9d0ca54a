package sidecar

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The attacks of issue 20, each scaled down (fewer connections, smaller
// caps) so that it runs in seconds on loopback; each failed on the main of
// e76bba5. A victim's request that is not answered at all counts as
// refused after victimTimeout: on that main it waited for minutes.

// victimTimeout bounds a victim's request: far above what it takes on an
// idle server, far below how long the attacks of issue 20 held it.
const victimTimeout = 30 * time.Second

// initializeBody is an initialize of protocol 2025-11-25.
const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",` +
	`"capabilities":{},"clientInfo":{"name":"fair","version":"1"}}}`

// victimCall posts a tools/call of state_set with token (none if "") on a
// new connection and returns the status, or 0 if no answer came within
// victimTimeout.
func victimCall(t *testing.T, baseURL, token, body string) (int, http.Header, string) {
	t.Helper()
	hc := &http.Client{Timeout: victimTimeout, Transport: &http.Transport{DisableKeepAlives: true}}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, baseURL+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Logf("victim's request: %v", err)
		return 0, nil, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func setCall(key string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"state_set","arguments":{"key":%q,"value":1}}}`, key)
}

// Attack 1: idle keep-alive connections, no token needed. Connections that
// sent one GET /healthz and went idle held all of MaxConnections for the
// idle timeout (2 minutes, renewable): an authenticated client on a new
// connection was shut out.
func TestAttackIdleUnauthenticatedConnections(t *testing.T) {
	cfg := memConfig()
	cfg.Tokens = []Token{{Secret: "tok-a", Namespace: "a"}}
	cfg.MaxConnections = 32
	setFair(&cfg, fairLimits{unauthConns: 8})
	r := startHTTP(t, cfg)
	addr := strings.TrimPrefix(r.URL, "http://")

	const attackers = 48 // more than MaxConnections
	var answered atomic.Int32
	var wg sync.WaitGroup
	for range attackers {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		wg.Go(func() {
			fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
			_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			if resp, err := http.ReadResponse(bufio.NewReader(conn), nil); err == nil {
				resp.Body.Close()
				answered.Add(1)
			}
			// and then idle, kept alive
		})
	}
	wg.Wait()
	t.Logf("%d of %d idle /healthz connections were answered", answered.Load(), attackers)

	for i := range 3 {
		code, _, body := victimCall(t, r.URL, "tok-a", setCall(fmt.Sprintf("k%d", i)))
		if code != http.StatusOK || !strings.Contains(body, `"result"`) {
			t.Fatalf("authenticated call %d on a new connection while %d idle unauthenticated connections are open: %d %s",
				i, attackers, code, body)
		}
	}
	if n := gatheredCounter(t, r.Metrics(), MetricConnectionsEvicted, evictUnauth); n == 0 {
		t.Errorf("%s{reason=%q} is 0", MetricConnectionsEvicted, evictUnauth)
	}
}

// Attack 2: an escaped tool name escaped the long-poll accounting.
// "state_wai\u0074" is state_wait once decoded, but the raw bytes do not
// contain `_wait"`: such calls took the slots of MaxConcurrentRequests, and
// every other call got 503.
func TestAttackEscapedLongPollName(t *testing.T) {
	cfg := memConfig()
	cfg.MaxConcurrentRequests = 4
	cfg.RequestTimeout = 2 * time.Second
	r := startHTTP(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // before the server's shutdown: the waits end

	const waiters = 4 // as many as MaxConcurrentRequests
	for i := range waiters {
		go func() {
			// Each its own tenant: an address of its own.
			hc := &http.Client{Transport: &http.Transport{DialContext: dialFrom(fmt.Sprintf("127.0.0.%d", 10+i))}}
			body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"state_wai\u0074",` +
				`"arguments":{"key":"never","after_version":0,"timeout_seconds":60}}}`
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.URL+"/mcp", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if resp, err := hc.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	eventually(t, "the escaped waits to park", func() bool { return r.store.Waiting() == waiters })
	for i := range 3 {
		if code, _, body := victimCall(t, r.URL, "", `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`); code != http.StatusOK {
			t.Fatalf("tools/list %d while %d escaped state_wait calls wait (MaxConcurrentRequests 4): %d %s", i, waiters, code, body)
		}
	}
}

// Attack 3: a long-poll flood. Parked state_wait calls, with tenant A's
// token or from one address of an open sidecar, held every connection: a
// client of another tenant on a new connection was never accepted.
func TestAttackLongPollFlood(t *testing.T) {
	for _, tc := range []struct {
		name           string
		tokens         []Token
		attacker       string // token, or "" for none
		attackerSource string
		victim         string
	}{
		{"tokens", []Token{{Secret: "tok-a", Namespace: "a"}, {Secret: "tok-b", Namespace: "b"}}, "tok-a", "127.0.0.1", "tok-b"},
		{"open", nil, "", "127.0.0.2", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := memConfig()
			cfg.Tokens = tc.tokens
			cfg.MaxConnections = 48
			setFair(&cfg, fairLimits{longPolls: 8})
			r := startHTTP(t, cfg)
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)

			const flood = 64 // more than MaxConnections
			hc := &http.Client{Transport: &http.Transport{DialContext: dialFrom(tc.attackerSource), MaxConnsPerHost: 0}}
			var refused, failed atomic.Int32
			var badRefusal atomic.Value
			for range flood {
				go func() {
					body := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"state_wait",` +
						`"arguments":{"key":"never","after_version":0,"timeout_seconds":60}}}`
					req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.URL+"/mcp", strings.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Accept", "application/json, text/event-stream")
					if tc.attacker != "" {
						req.Header.Set("Authorization", "Bearer "+tc.attacker)
					}
					resp, err := hc.Do(req)
					if err != nil {
						failed.Add(1)
						return
					}
					defer resp.Body.Close()
					if resp.StatusCode == http.StatusTooManyRequests {
						if msg := checkRefusal(resp, 3); msg != "" {
							badRefusal.Store(msg)
						}
						refused.Add(1)
					}
				}()
			}
			// The flood is spent when every wait either parked or was
			// refused; on the main of e76bba5 it held every connection
			// instead, and the victim's connection was never accepted.
			eventually(t, "the flood to park or be refused", func() bool {
				return r.store.Waiting()+int(refused.Load()+failed.Load()) >= min(flood, cfg.MaxConnections)
			})
			t.Logf("flood of %d: %d parked, %d refused, %d failed", flood, r.store.Waiting(), refused.Load(), failed.Load())
			for i := range 3 {
				code, _, body := victimCall(t, r.URL, tc.victim, setCall(fmt.Sprintf("v%d", i)))
				if code != http.StatusOK || !strings.Contains(body, `"result"`) {
					t.Fatalf("another tenant's call %d during a flood of %d state_wait: %d %s", i, flood, code, body)
				}
			}
			if msg, _ := badRefusal.Load().(string); msg != "" {
				t.Error(msg)
			}
			if w := r.store.Waiting(); w > 8 {
				t.Errorf("%d waits parked; the tenant's share is 8", w)
			}
		})
	}
}

// Attack 4: the stateful session cap was shared by all tenants: tenant A's
// initialize calls used it up, and tenant B's initialize got 503.
func TestAttackSessionsOfOneTenant(t *testing.T) {
	cfg := memConfig()
	cfg.Stateful, cfg.MaxSessions = true, 20
	cfg.Tokens = []Token{{Secret: "tok-a", Namespace: "a"}, {Secret: "tok-b", Namespace: "b"}}
	setFair(&cfg, fairLimits{sessions: 5})
	r := startHTTP(t, cfg)
	refusedA := 0
	for range 30 {
		code, hdr, body := victimCall(t, r.URL, "tok-a", initializeBody)
		switch code {
		case http.StatusOK, http.StatusServiceUnavailable: // 503: the server's cap, which B then meets too
		case http.StatusTooManyRequests:
			refusedA++
			if hdr.Get("Retry-After") == "" || !strings.Contains(body, `"error"`) {
				t.Errorf("a refused initialize: Retry-After %q, body %s", hdr.Get("Retry-After"), body)
			}
		default:
			t.Fatalf("tenant A's initialize: %d %s", code, body)
		}
	}
	if refusedA != 25 {
		t.Errorf("tenant A: %d of 30 initialize calls refused, want 25 (its share is 5)", refusedA)
	}
	for i := range 5 {
		if code, _, body := victimCall(t, r.URL, "tok-b", initializeBody); code != http.StatusOK {
			t.Fatalf("tenant B's initialize %d after tenant A's 30: %d %s", i, code, body)
		}
	}
}

// checkRefusal checks a 429: Retry-After and a JSON-RPC error that answers
// id; it returns what is wrong, or "".
func checkRefusal(resp *http.Response, id int) string {
	if resp.Header.Get("Retry-After") == "" {
		return "a 429 without Retry-After"
	}
	var m struct {
		ID    int `json:"id"`
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || m.ID != id || m.Error.Code == 0 || m.Error.Message == "" {
		return fmt.Sprintf("a 429 whose body is not a JSON-RPC error for id %d: %+v %v", id, m, err)
	}
	return ""
}

// dialFrom dials from the loopback address src (any 127.x.y.z), so that
// one test can be many clients of an open sidecar.
func dialFrom(src string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	return d.DialContext
}

// Attack 1 with a token: connections that made one authenticated call and
// went idle do not shut another client out either: when every place is
// taken, the oldest idle connection is closed to make room.
func TestAttackIdleAuthenticatedConnections(t *testing.T) {
	cfg := memConfig()
	cfg.Tokens = []Token{{Secret: "tok-a", Namespace: "a"}, {Secret: "tok-b", Namespace: "b"}}
	cfg.MaxConnections = 16
	r := startHTTP(t, cfg)
	addr := strings.TrimPrefix(r.URL, "http://")
	const idle = 16 // every place
	for i := range idle {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
		fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer tok-a\r\nContent-Type: application/json\r\n"+
			"Accept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s", addr, len(body), body)
		_ = conn.SetReadDeadline(time.Now().Add(wait))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("tenant A's call on connection %d: %v %v", i, resp, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		// and then idle, kept alive
	}
	for i := range 3 {
		if code, _, body := victimCall(t, r.URL, "tok-b", setCall(fmt.Sprintf("k%d", i))); code != http.StatusOK {
			t.Fatalf("tenant B's call %d while %d idle connections of A hold every place: %d %s", i, idle, code, body)
		}
	}
	if n := gatheredCounter(t, r.Metrics(), MetricConnectionsEvicted, evictFull); n == 0 {
		t.Errorf("%s{reason=%q} is 0", MetricConnectionsEvicted, evictFull)
	}
}
