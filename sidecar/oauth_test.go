package sidecar

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/statesidecar/state/internal/oidctest"
	"github.com/statesidecar/state/mcpadapter"
)

const testAudience = "https://state.test/mcp"

// oauthSidecar starts a real OpenID provider and a sidecar that accepts its
// tokens (tenant from the "tenant" claim) and a read-only static token.
func oauthSidecar(t *testing.T, mod ...func(*Config)) (*oidctest.Provider, *running) {
	t.Helper()
	client := func(id, sub, tenant, aud string, scopes ...string) oidctest.Client {
		return oidctest.Client{ID: id, Secret: id + "-secret", Subject: sub, Tenant: tenant, Audience: aud, Scopes: scopes}
	}
	p := oidctest.Start(t, oidctest.Options{},
		client("reader", "alice", "team-a", testAudience, "state:read"),
		client("writer", "bob", "team-a", testAudience, "state:read", "state:write"),
		client("admin", "root", "team-a", testAudience, "state:admin"),
		client("noscope", "eve", "team-a", testAudience, "profile"),
		client("elsewhere", "carol", "team-a", "https://other.test/mcp", "state:write"),
		client("teamb", "dave", "team-b", testAudience, "state:write"),
	)
	cfg := memConfig()
	cfg.OAuth = OAuthConfig{Issuer: p.Issuer, Audience: testAudience, TenantClaim: "tenant"}
	cfg.Tokens = []Token{{Secret: "static-ro", Namespace: "team-a", Scopes: []string{"state:read"}}}
	cfg.AllowReset, cfg.AllowErase, cfg.AccessLog = true, true, true
	for _, m := range mod {
		m(&cfg)
	}
	return p, startHTTP(t, cfg)
}

func bearer(tok string) transport.StreamableHTTPCOption {
	return transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + tok})
}

func tokenOf(t *testing.T, p *oidctest.Provider, id string) string {
	t.Helper()
	return p.MustToken(t, id, id+"-secret")
}

func TestOAuthMetadataAndChallenges(t *testing.T) {
	p, r := oauthSidecar(t)
	code, body := get(t, r.URL+"/.well-known/oauth-protected-resource/mcp")
	var md struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
		ScopesSupported      []string `json:"scopes_supported"`
	}
	if err := json.Unmarshal([]byte(body), &md); code != http.StatusOK || err != nil {
		t.Fatalf("metadata: %d %s", code, body)
	}
	if md.Resource != testAudience || !slices.Equal(md.AuthorizationServers, []string{p.Issuer}) ||
		!slices.Equal(md.ScopesSupported, []string{"state:read", "state:write", "state:admin"}) {
		t.Fatalf("metadata = %+v", md)
	}
	if code, _ := get(t, r.URL+"/.well-known/oauth-protected-resource"); code != http.StatusOK {
		t.Fatalf("root metadata: %d", code)
	}

	const list = `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	meta := `resource_metadata="https://state.test/.well-known/oauth-protected-resource/mcp"`
	for _, tc := range []struct {
		name, token string
		code        int
		challenge   []string
	}{
		{"no token", "", http.StatusUnauthorized, []string{"Bearer " + meta}},
		{"wrong audience", tokenOf(t, p, "elsewhere"), http.StatusUnauthorized, []string{meta, `error="invalid_token"`, "audience"}},
		{"garbage", "not.a.jwt", http.StatusUnauthorized, []string{meta, `error="invalid_token"`}},
		{"no state scope", tokenOf(t, p, "noscope"), http.StatusForbidden, []string{meta, `error="insufficient_scope"`, `scope="state:read"`}},
	} {
		hdr := map[string]string{}
		if tc.token != "" {
			hdr["Authorization"] = "Bearer " + tc.token
		}
		resp := post(t, r.URL+"/mcp", hdr, list)
		ch := resp.Header.Get("WWW-Authenticate")
		if resp.StatusCode != tc.code {
			t.Errorf("%s: status %d, want %d (%s)", tc.name, resp.StatusCode, tc.code, ch)
		}
		for _, want := range tc.challenge {
			if !strings.Contains(ch, want) {
				t.Errorf("%s: WWW-Authenticate %q lacks %q", tc.name, ch, want)
			}
		}
	}
}

// writeToolArgs are valid arguments of the tools that change state; a tool
// not listed is called without arguments (the access check comes first).
func writeToolArgs(run string) map[string]map[string]any {
	return map[string]map[string]any{
		"state_set":           {"key": "new", "value": 1},
		"state_delete":        {"key": "plan"},
		"workflow_create":     {"name": "n"},
		"workflow_claim":      {"run_id": run, "agent_id": "a"},
		"workflow_checkpoint": {"run_id": run, "step": 1, "output": 1},
		"lease_acquire":       {"resource_id": "r", "holder_id": "h", "ttl_seconds": 10},
		"lease_release":       {"resource_id": "printer", "holder_id": "bob"},
		"lease_renew":         {"resource_id": "printer", "holder_id": "bob", "ttl_seconds": 10},
		"session_save":        {"session_id": "s", "context": map[string]any{}},
		"sidecar_erase":       {"subject": "alice"},
	}
}

func TestOAuthScopesAndPrincipal(t *testing.T) {
	p, r := oauthSidecar(t)
	writer := connect(t, r.URL, false, bearer(tokenOf(t, p, "writer")))
	call(t, writer, "state_set", map[string]any{"key": "plan", "value": "v1", "agent_id": "planner-7"})
	run := call(t, writer, "workflow_create", map[string]any{"name": "job"})["run_id"].(string)
	call(t, writer, "lease_acquire", map[string]any{"resource_id": "printer", "holder_id": "bob", "ttl_seconds": 60})

	// The principal is the token's subject, apart from the claimed agent id.
	h := call(t, writer, "history_log", map[string]any{"key": "plan"})
	e := h["entries"].([]any)[0].(map[string]any)
	if e["principal"] != "bob" || e["agent_id"] != "planner-7" {
		t.Fatalf("history entry %v: want principal bob and agent_id planner-7", e)
	}
	entries := func() int {
		return len(call(t, writer, "history_log", map[string]any{"n": 1000})["entries"].([]any))
	}
	before := entries()

	readers := map[string]*client.Client{
		"oauth reader":  connect(t, r.URL, false, bearer(tokenOf(t, p, "reader"))),
		"static reader": connect(t, r.URL, false, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer static-ro"})),
	}
	args := writeToolArgs(run)
	var readTools, writeTools []string
	for _, n := range append(mcpadapter.ToolNames(), "sidecar_erase") {
		if a, _ := mcpadapter.ToolAccess(n); a == mcpadapter.AccessRead {
			readTools = append(readTools, n)
		} else {
			writeTools = append(writeTools, n)
		}
	}
	slices.Sort(readTools)
	for name, c := range readers {
		if got := toolNames(t, c); !slices.Equal(got, readTools) {
			t.Errorf("%s: tools/list shows %v, want the read-only tools %v", name, got, readTools)
		}
		if got := call(t, c, "state_get", map[string]any{"key": "plan"}); got["value"] != "v1" {
			t.Errorf("%s: state_get = %v", name, got)
		}
		for _, tool := range writeTools {
			msg := callErr(t, c, tool, args[tool])
			need, _ := mcpadapter.ToolAccess(tool)
			scope := map[mcpadapter.Access]string{mcpadapter.AccessWrite: "state:write", mcpadapter.AccessAdmin: "state:admin"}[need]
			if !strings.Contains(msg, "permission denied: "+tool+" needs the "+scope+" scope") || !strings.Contains(msg, "state:read") {
				t.Errorf("%s calling %s: %q", name, tool, msg)
			}
		}
	}
	if after := entries(); after != before {
		t.Fatalf("read-only callers wrote: %d history entries before, %d after", before, after)
	}
	if got := call(t, writer, "state_get", map[string]any{"key": "plan"}); got["value"] != "v1" {
		t.Fatalf("plan = %v", got)
	}

	// Writers are not admins; admins reset.
	if msg := callErr(t, writer, "sidecar_reset", nil); !strings.Contains(msg, "needs the state:admin scope") {
		t.Errorf("writer's sidecar_reset: %q", msg)
	}
	if got := toolNames(t, writer); slices.Contains(got, "sidecar_reset") || slices.Contains(got, "sidecar_erase") || !slices.Contains(got, "state_set") {
		t.Errorf("writer's tools/list: %v", got)
	}
	admin := connect(t, r.URL, false, bearer(tokenOf(t, p, "admin")))
	call(t, admin, "sidecar_reset", nil)
	if got := call(t, writer, "state_get", map[string]any{"key": "plan"}); got["found"] != false {
		t.Errorf("after the admin's reset: %v", got)
	}
}

func TestOAuthTenantIsolation(t *testing.T) {
	p, r := oauthSidecar(t)
	a := connect(t, r.URL, false, bearer(tokenOf(t, p, "writer")))
	b := connect(t, r.URL, false, bearer(tokenOf(t, p, "teamb")))
	call(t, a, "state_set", map[string]any{"key": "k", "value": "a's"})
	if got := call(t, b, "state_get", map[string]any{"key": "k"}); got["found"] != false {
		t.Fatalf("team-b reads team-a's key: %v", got)
	}
	if ns := call(t, b, "sidecar_health", nil)["namespace"]; ns != "team-b" {
		t.Fatalf("team-b's namespace = %v", ns)
	}
}

func TestOAuthFollowsKeyRotation(t *testing.T) {
	// The sidecar fetches the keys again for an unknown key id at most
	// every 10 s (oauth.DefaultMinRefreshInterval, whose limit package
	// oauth's tests check with a fake clock); here without the limit.
	p, r := oauthSidecar(t, func(c *Config) { c.OAuth.minRefreshInterval = -1 })
	c := connect(t, r.URL, false, bearer(tokenOf(t, p, "writer")))
	call(t, c, "state_set", map[string]any{"key": "k", "value": 1})
	p.Rotate(t, false) // the sidecar has never seen the new key
	c2 := connect(t, r.URL, false, bearer(tokenOf(t, p, "writer")))
	call(t, c2, "state_set", map[string]any{"key": "k", "value": 2})
}
