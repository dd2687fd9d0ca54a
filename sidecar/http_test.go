package sidecar

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/statesidecar/state/mcpadapter"
)

// bigInt is 2^53 + 1: a float64 cannot hold it.
const bigInt = "9007199254740993"

func TestHTTPServesBothProtocolEras(t *testing.T) {
	r := startHTTP(t, memConfig())
	for _, legacy := range []bool{false, true} {
		t.Run(fmt.Sprintf("legacy=%v", legacy), func(t *testing.T) {
			c := connect(t, r.URL, legacy)
			if got, want := c.ProtocolVersion(), map[bool]string{true: mcp.ProtocolVersion20251125, false: "2026-07-28"}[legacy]; got != want {
				t.Errorf("negotiated protocol %q, want %q", got, want)
			}
			if legacy && c.GetSessionId() != "" {
				t.Errorf("a stateless sidecar must not issue a session id, got %q", c.GetSessionId())
			}
			if got, want := toolNames(t, c), mcpadapter.ToolNames(); !sameSet(got, want) {
				t.Fatalf("tools/list: got %v, want the %d tools %v", got, len(want), want)
			}
			key := fmt.Sprintf("big/%v", legacy)
			call(t, c, "state_set", map[string]any{"key": key, "value": json.Number(bigInt), "agent_id": "a1"})
			got := call(t, c, "state_get", map[string]any{"key": key})
			if got["found"] != true || got["value"] != json.Number(bigInt) || got["agent_id"] != "a1" {
				t.Errorf("state_get(%s) = %v: want the value %s with every digit, written by a1", key, got, bigInt)
			}
			msg := callErr(t, c, "lease_acquire", map[string]any{"resource_id": "r", "holder_id": "h", "ttl_seconds": -1})
			if !strings.Contains(msg, "ttl") {
				t.Errorf("a negative TTL must be a tool error naming it, got %q", msg)
			}
		})
	}
}

func TestTokensIsolateNamespaces(t *testing.T) {
	cfg := memConfig()
	cfg.Tokens = []Token{{Secret: "alpha-secret", Namespace: "team-a"}, {Secret: "beta-secret", Namespace: "team-b"}}
	r := startHTTP(t, cfg)
	bearer := func(tok string) transport.StreamableHTTPCOption {
		return transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + tok})
	}
	a := connect(t, r.URL, false, bearer("alpha-secret"))
	b := connect(t, r.URL, true, bearer("beta-secret"))

	call(t, a, "state_set", map[string]any{"key": "plan", "value": map[string]any{"owner": "a"}})
	run := call(t, a, "workflow_create", map[string]any{"name": "job", "tags": map[string]any{"team": "a"}})
	call(t, a, "lease_acquire", map[string]any{"resource_id": "printer", "holder_id": "a", "ttl_seconds": 60})
	call(t, a, "session_save", map[string]any{"session_id": "s1", "context": map[string]any{"x": 1}})

	if got := call(t, b, "state_get", map[string]any{"key": "plan"}); got["found"] != false {
		t.Errorf("team-b sees team-a's key: %v", got)
	}
	if got := call(t, b, "state_list", map[string]any{}); len(got["keys"].([]any)) != 0 {
		t.Errorf("team-b lists team-a's keys: %v", got)
	}
	if got := call(t, b, "workflow_list", map[string]any{}); len(got["runs"].([]any)) != 0 {
		t.Errorf("team-b lists team-a's runs: %v", got)
	}
	if msg := callErr(t, b, "workflow_status", map[string]any{"run_id": run["run_id"]}); !strings.Contains(msg, "not found") {
		t.Errorf("team-b must not find team-a's run: %q", msg)
	}
	if got := call(t, b, "lease_acquire", map[string]any{"resource_id": "printer", "holder_id": "b", "ttl_seconds": 60}); got["acquired"] != true {
		t.Errorf("team-b is blocked by team-a's lease: %v", got)
	}
	if got := call(t, b, "session_restore", map[string]any{"session_id": "s1"}); got["found"] != false {
		t.Errorf("team-b restores team-a's session: %v", got)
	}
	if got := call(t, b, "history_log", map[string]any{"n": 50}); len(got["entries"].([]any)) != 1 {
		t.Errorf("team-b's history must hold only its own lease: %v", got)
	}
	ha, hb := call(t, a, "sidecar_health", nil), call(t, b, "sidecar_health", nil)
	if ha["key_count"] != json.Number("1") || hb["key_count"] != json.Number("0") {
		t.Errorf("health counts must be per namespace: a=%v b=%v", ha, hb)
	}
	if r.Store().NamespaceName() != "default" {
		t.Fatalf("store namespace %q", r.Store().NamespaceName())
	}
}

func TestWrongOrMissingTokenIs401(t *testing.T) {
	cfg := memConfig()
	cfg.Tokens = []Token{{Secret: "right", Namespace: "ns"}}
	r := startHTTP(t, cfg)
	for name, hdr := range map[string]map[string]string{
		"missing":      nil,
		"wrong":        {"Authorization": "Bearer wrong"},
		"prefix":       {"Authorization": "Bearer righ"},
		"not bearer":   {"Authorization": "Basic cmlnaHQ6"},
		"bare token":   {"Authorization": "right"},
		"empty bearer": {"Authorization": "Bearer "},
	} {
		if _, err := dial(t, r.URL, false, transport.WithHTTPHeaders(hdr)); !client.IsAuthorizationRequiredError(err) {
			t.Errorf("%s token: want an authorization error, got %v", name, err)
		}
		before := metric(t, r.URL, MetricAuthFailures)
		resp := post(t, r.URL+"/mcp", hdr, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer ") {
			t.Errorf("%s token: got %d, WWW-Authenticate %q; want 401 with a Bearer challenge",
				name, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
		if after := metric(t, r.URL, MetricAuthFailures); after != before+1 {
			t.Errorf("%s token: %s went from %v to %v, want one more", name, MetricAuthFailures, before, after)
		}
	}
	c := connect(t, r.URL, false, transport.WithHTTPHeaders(map[string]string{"Authorization": "bearer right"}))
	call(t, c, "state_set", map[string]any{"key": "k", "value": 1})
}

// post sends a JSON-RPC body with headers and returns the response, its body
// read and closed.
func post(t *testing.T, url string, headers map[string]string, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp
}

// A proxy in the same pod forwards to 127.0.0.1 but keeps the Host the
// client used. Without tokens mcp-go's DNS-rebinding guard refuses that
// (it is what protects an unauthenticated loopback server from web pages);
// with tokens the guard is off and the proxy works.
func TestProxyHostHeader(t *testing.T) {
	host := transport.WithStreamableHTTPHost("state-sidecar.team.svc.cluster.local")

	open := startHTTP(t, memConfig())
	if _, err := dial(t, open.URL, false, host); err == nil {
		t.Errorf("without tokens a client sending a non-localhost Host on loopback must fail")
	}
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	if resp := post(t, open.URL+"/mcp", map[string]string{"Host": "state-sidecar.team.svc.cluster.local"}, list); resp.StatusCode != http.StatusForbidden {
		t.Errorf("without tokens a non-localhost Host on loopback must get 403, got %d", resp.StatusCode)
	}
	c := connect(t, open.URL, false, transport.WithStreamableHTTPHost("localhost"))
	call(t, c, "sidecar_health", nil)

	cfg := memConfig()
	cfg.Tokens = []Token{{Secret: "tok", Namespace: ""}}
	authed := startHTTP(t, cfg)
	c = connect(t, authed.URL, true, host, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer tok"}))
	call(t, c, "state_set", map[string]any{"key": "via-proxy", "value": true})
}

func TestResetOnlyWhenAllowed(t *testing.T) {
	r := startHTTP(t, memConfig())
	c := connect(t, r.URL, false)
	call(t, c, "state_set", map[string]any{"key": "keep", "value": 1})
	callErr(t, c, "sidecar_reset", nil)
	if got := call(t, c, "state_get", map[string]any{"key": "keep"}); got["found"] != true {
		t.Fatalf("a refused reset must not clear anything: %v", got)
	}

	cfg := memConfig()
	cfg.AllowReset = true
	r = startHTTP(t, cfg)
	c = connect(t, r.URL, false)
	call(t, c, "state_set", map[string]any{"key": "gone", "value": 1})
	if got := call(t, c, "sidecar_reset", nil); got["ok"] != true || got["cleared"] == json.Number("0") {
		t.Errorf("sidecar_reset = %v", got)
	}
	if got := call(t, c, "state_get", map[string]any{"key": "gone"}); got["found"] != false {
		t.Errorf("reset left the key: %v", got)
	}
}

func TestHealthReadyAndMetrics(t *testing.T) {
	r := startHTTP(t, memConfig())
	if code, body := get(t, r.URL+"/healthz"); code != 200 || !strings.Contains(body, `"ok"`) {
		t.Errorf("/healthz: %d %s", code, body)
	}
	if code, body := get(t, r.URL+"/readyz"); code != 200 || !strings.Contains(body, `"status":"ok"`) || !strings.Contains(body, `"backend":"memory"`) {
		t.Errorf("/readyz: %d %s", code, body)
	}
	c := connect(t, r.URL, false)
	call(t, c, "state_set", map[string]any{"key": "k", "value": 1})
	call(t, c, "state_get", map[string]any{"key": "nope"})
	callErr(t, c, "workflow_status", map[string]any{"run_id": "wf-000000000000"})

	code, body := get(t, r.URL+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	for _, want := range []string{
		MetricToolCalls + `{tool="state_set"} 1`,
		MetricToolCalls + `{tool="workflow_status"} 1`,
		MetricToolCalls + `{tool="lease_renew"} 0`,
		MetricToolErrors + `{tool="workflow_status"} 1`,
		MetricToolErrors + `{tool="state_get"} 0`,
		MetricToolDuration + `_count{tool="state_get"} 1`,
		MetricBackendDuration + `_count{call="commit"}`,
		MetricHTTPRequests + `{code="200",method="post"}`,
		MetricHTTPInFlight + " 0",
		MetricInfo + `{backend="memory",transport="http",version="0.1.0"} 1`,
		"go_goroutines",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(body, MetricBackendErrors+"{") {
		t.Errorf("a not-found get is an answer, not a backend error:\n%s", grep(body, MetricBackendErrors))
	}
	if code, _ := get(t, r.URL+"/nope"); code != 404 {
		t.Errorf("unknown path: %d", code)
	}
}

func grep(s, sub string) string {
	var out []string
	for l := range strings.Lines(s) {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "")
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// metric returns the value of one series (name with labels, as exposed) from
// /metrics, or 0 when it is absent.
func metric(t *testing.T, baseURL, series string) float64 {
	t.Helper()
	_, body := get(t, baseURL+"/metrics")
	for l := range strings.Lines(body) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric %s: %q", series, l)
			}
			return f
		}
	}
	return 0
}

// A body over MaxRequestBytes is refused without reading it all, and the
// sidecar goes on serving.
func TestOversizedRequest(t *testing.T) {
	cfg := memConfig()
	r := startHTTP(t, cfg)
	big := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"state_set","arguments":{"key":"k","value":"` +
		strings.Repeat("x", int(cfg.MaxRequestBytes)) + `"}}}`
	if resp := post(t, r.URL+"/mcp", nil, big); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a %d-byte request: %d, want 413", len(big), resp.StatusCode)
	}
	c := connect(t, r.URL, false)
	call(t, c, "state_set", map[string]any{"key": "k", "value": "small"})
}

// rawCall posts one tools/call with args as raw JSON text and returns the
// response body.
func rawCall(t *testing.T, baseURL, tool, args string) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, baseURL+"/mcp", strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`+tool+`","arguments":`+args+`}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// Over HTTP, bytes and numbers arrive as the client sent them: a lone
// surrogate in a key is a tool error naming it (x\ud800 and x\udbff do not
// alias), a value keeps 1e400, and ttl_seconds 1e309 is a tool error
// naming it rather than a protocol error.
func TestBytesAndNumbersOverHTTP(t *testing.T) {
	r := startHTTP(t, memConfig())
	for _, key := range []string{`"x\ud800"`, `"x\udbff"`} {
		if got := rawCall(t, r.URL, "state_set", `{"key":`+key+`,"value":1}`); !strings.Contains(got, `"isError":true`) ||
			!strings.Contains(got, "key must be valid Unicode text") {
			t.Errorf("state_set key %s: %s", key, got)
		}
	}
	if got := rawCall(t, r.URL, "state_set", `{"key":"big","value":{"a":1e400}}`); strings.Contains(got, `"isError":true`) || strings.Contains(got, `"error"`) {
		t.Fatalf("state_set value 1e400: %s", got)
	}
	if got := rawCall(t, r.URL, "state_get", `{"key":"big"}`); !strings.Contains(got, `"value":{"a":1e400}`) {
		t.Errorf("state_get: the value must come back as 1e400: %s", got)
	}
	got := rawCall(t, r.URL, "state_set", `{"key":"k","value":1,"ttl_seconds":1e309}`)
	if !strings.Contains(got, `"isError":true`) || !strings.Contains(got, "ttl_seconds is too large, got 1e309") || strings.Contains(got, "float64") {
		t.Errorf("ttl_seconds 1e309: %s", got)
	}
	if got := rawCall(t, r.URL, "state_list", `{}`); !strings.Contains(got, `"keys":["big"]`) {
		t.Errorf("only the value with 1e400 was stored: %s", got)
	}
}
