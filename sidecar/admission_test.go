package sidecar

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/prometheus/client_golang/prometheus"
)

// A request's kind comes from its decoded method and tool name: however
// they are spelled (escapes, case, duplicate keys), the kind is the one of
// the call mcp-go serves.
func TestDecodeRequest(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		want requestKind
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"state_wait"}}`, kindLongPoll},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"state_wai\u0074"}}`, kindLongPoll},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"\u0077orkflow_wait"}}`, kindLongPoll},
		{`{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{"name":"state_wait"}}`, kindLongPoll},
		{`{"jsonrpc":"2.0","id":1,"METHOD":"tools/call","Params":{"NAME":"state_wait"}}`, kindLongPoll},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"state_get","name":"state_wait"}}`, kindLongPoll},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"state_wait","name":"state_get"}}`, kindOther},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"State_Wait"}}`, kindOther}, // no such tool
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"state_get"}}`, kindOther},
		{`{"jsonrpc":"2.0","id":1,"method":"tasks/result","params":{"taskId":"x"}}`, kindLongPoll},
		{`{"jsonrpc":"2.0","id":1,"method":"tasks\u002fresult","params":{"taskId":"x"}}`, kindLongPoll},
		{`{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen"}`, kindLongPoll},
		{`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, kindInitialize},
		{`{"jsonrpc":"2.0","id":1,"method":"initiali\u007ae"}`, kindInitialize},
		{` [{"jsonrpc":"2.0","id":1,"method":"tools/list"},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"state_wait"}}]`, kindLongPoll},
		{`[{"jsonrpc":"2.0","id":1,"method":"initialize"}]`, kindInitialize},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[]}`, kindOther},
		{`not json`, kindOther},
	} {
		if got := decodeRequest([]byte(tc.msg)).kind; got != tc.want {
			t.Errorf("%s: kind %d, want %d", tc.msg, got, tc.want)
		}
	}
}

// mcpGoWaits reports whether mcp-go would serve msg as a long-poll: it
// decodes it as its request handler does (server.HandleMessage).
func mcpGoWaits(msg []byte) (waits, clean bool) {
	var base struct {
		JSONRPC string        `json:"jsonrpc"`
		Method  mcp.MCPMethod `json:"method"`
		ID      any           `json:"id,omitempty"`
	}
	if json.Unmarshal(msg, &base) != nil {
		return false, false
	}
	switch base.Method {
	case "tasks/result", "subscriptions/listen":
		return true, true
	case mcp.MethodToolsCall:
		var req mcp.CallToolRequest
		if err := json.Unmarshal(msg, &req); err != nil {
			return false, false
		}
		n := req.Params.Name
		return n == "state_wait" || n == "workflow_wait", true
	}
	return false, true
}

// FuzzDecodeRequest checks decodeRequest against mcp-go's own decoding: a
// message mcp-go serves as a long-poll is always counted as one, and a
// message mcp-go decodes without error is counted as what it is.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"state_wai\u0074","arguments":{"key":"k"}}}`,
		`{"jsonrpc":"2.0","id":1,"Method":"tools/call","params":{"Name":"workflow_wait"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"state_get","NAME":"state_wait"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","method":"tools/list","params":{"name":"state_wait"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tasks/result","params":{"taskId":"t"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"state_wait","_meta":5}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"state_wait","arguments":{"timeout_seconds":1e999999}}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"state_wait"}}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		d := decodeRequest(msg)
		waits, clean := mcpGoWaits(msg)
		if waits && d.kind != kindLongPoll {
			t.Fatalf("%q: mcp-go waits on it, but it is not counted as a long-poll", msg)
		}
		if clean && !d.batch && !waits && d.kind == kindLongPoll {
			t.Fatalf("%q: counted as a long-poll, but mcp-go does not wait on it", msg)
		}
	})
}

// A tenant at a limit is refused, with the limit named; another tenant is
// not; a release gives the share back.
func TestAdmissionShares(t *testing.T) {
	a := newAdmission(FairConfig{MaxConcurrentRequests: 2, MaxLongPolls: 1, MaxSessions: 1}, prometheus.NewRegistry())
	r1, ref := a.admit("a", kindOther)
	if ref != nil {
		t.Fatal(ref.message)
	}
	if _, ref := a.admit("a", kindOther); ref != nil {
		t.Fatal(ref.message)
	}
	if _, ref := a.admit("a", kindOther); ref == nil || ref.limit != limitConcurrency {
		t.Fatalf("a 3rd request of a at 2 of 2: %+v", ref)
	}
	if _, ref := a.admit("a", kindLongPoll); ref != nil {
		t.Fatalf("a long-poll does not take a request slot: %+v", ref)
	}
	if _, ref := a.admit("a", kindLongPoll); ref == nil || ref.limit != limitLongPolls {
		t.Fatalf("a 2nd long-poll of a at 1 of 1: %+v", ref)
	}
	if _, ref := a.admit("b", kindOther); ref != nil {
		t.Fatalf("tenant b refused while a is at its limits: %+v", ref)
	}
	r1()
	r1() // twice is once
	if _, ref := a.admit("a", kindOther); ref != nil {
		t.Fatalf("a after a release: %+v", ref)
	}
	if _, ref := a.admit("a", kindOther); ref == nil {
		t.Fatal("a double release gave back two slots")
	}
	if a.reserveSession("a") != nil || a.reserveSession("a") == nil || a.reserveSession("b") != nil {
		t.Fatal("sessions: want 1 for a, then refused, and 1 for b")
	}
	a.endSession("a")
	if a.reserveSession("a") != nil {
		t.Fatal("a session after one ended")
	}
}

// The rate limit refuses above the burst and names when to come back, on a
// fake clock.
func TestAdmissionRate(t *testing.T) {
	now := time.Unix(1e9, 0)
	a := newAdmission(FairConfig{Rate: 10, Burst: 5}, prometheus.NewRegistry())
	a.now = func() time.Time { return now }
	for i := range 5 {
		rel, ref := a.admit("a", kindOther)
		if ref != nil {
			t.Fatalf("request %d within the burst: %s", i, ref.message)
		}
		rel()
	}
	_, ref := a.admit("a", kindOther)
	if ref == nil || ref.limit != limitRate || ref.retryAfter <= 0 || ref.retryAfter > 100*time.Millisecond {
		t.Fatalf("the 6th at once: %+v, want a rate refusal to retry within 100ms", ref)
	}
	if _, ref := a.admit("b", kindOther); ref != nil {
		t.Fatalf("tenant b refused for a's rate: %+v", ref)
	}
	now = now.Add(100 * time.Millisecond)
	if _, ref := a.admit("a", kindOther); ref != nil {
		t.Fatalf("a after 100ms at 10/s: %+v", ref)
	}
}

// Without tokens the tenant is the client's address; with tokens, the
// token's namespace.
func TestTenantOf(t *testing.T) {
	s := &Sidecar{}
	r, _ := http.NewRequest(http.MethodPost, "/mcp", nil)
	r.RemoteAddr = "192.0.2.7:5555"
	if got := s.tenantOf(r); got != "ip:192.0.2.7" {
		t.Errorf("tenant without tokens: %q", got)
	}
	s.cfg.Tokens = []Token{{Secret: "x", Namespace: ""}}
	if got := s.tenantOf(r); got != "ns:" {
		t.Errorf("tenant of the default namespace's token: %q", got)
	}
}

// precheck refuses from the headers a tenant that would be refused
// whatever its request is, and no other.
func TestAdmissionPrecheck(t *testing.T) {
	now := time.Unix(1e9, 0)
	a := newAdmission(FairConfig{MaxConcurrentRequests: 1, MaxLongPolls: 1, Rate: 10, Burst: 3}, prometheus.NewRegistry())
	a.now = func() time.Time { return now }
	if ref := a.precheck("a"); ref != nil {
		t.Fatalf("a new tenant: %+v", ref)
	}
	relReq, _ := a.admit("a", kindOther)
	if ref := a.precheck("a"); ref != nil {
		t.Fatalf("a tenant with a long-poll to spare: %+v", ref)
	}
	relPoll, _ := a.admit("a", kindLongPoll)
	if ref := a.precheck("a"); ref == nil || ref.limit != limitConcurrency {
		t.Fatalf("a tenant at both limits: %+v", ref)
	}
	relReq()
	relPoll()
	if rel, ref := a.admit("a", kindOther); ref != nil {
		t.Fatalf("the 3rd request within the burst of 3: %+v", ref)
	} else {
		rel()
	}
	if _, ref := a.admit("a", kindOther); ref == nil || ref.limit != limitRate {
		t.Fatalf("the 4th request beyond the burst of 3: %+v", ref)
	}
	if ref := a.precheck("a"); ref == nil || ref.limit != limitRate || ref.retryAfter <= 0 {
		t.Fatalf("a tenant over its rate: %+v", ref)
	}
	if ref := a.precheck("b"); ref != nil {
		t.Fatalf("another tenant: %+v", ref)
	}
}

// A tenant's refusals beyond a burst are answered after a delay, at most
// maxSlowed at a time; another tenant's are not.
func TestAdmissionSlowDown(t *testing.T) {
	now := time.Unix(1e9, 0)
	a := newAdmission(DefaultFairConfig(), prometheus.NewRegistry())
	a.now = func() time.Time { return now }
	for i := range refusalBurst {
		if d, _ := a.slowDown("a"); d != 0 {
			t.Fatalf("refusal %d within the burst delayed %v", i, d)
		}
	}
	var dones []func()
	for i := range maxSlowed {
		d, done := a.slowDown("a")
		if d != slowDelay {
			t.Fatalf("refusal %d beyond the burst: delay %v, want %v", refusalBurst+i, d, slowDelay)
		}
		dones = append(dones, done)
	}
	if d, _ := a.slowDown("a"); d != 0 {
		t.Fatalf("a refusal beyond %d held at once delayed %v", maxSlowed, d)
	}
	if d, _ := a.slowDown("b"); d != 0 {
		t.Fatalf("another tenant's first refusal delayed %v", d)
	}
	dones[0]()
	if d, done := a.slowDown("a"); d != slowDelay {
		t.Fatalf("once one ended: delay %v", d)
	} else {
		done()
	}
}
