package mcpadapter_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/server"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend/memstate"
	"github.com/statesidecar/state/encryption"
	"github.com/statesidecar/state/mcpadapter"
)

func TestSidecarErase(t *testing.T) {
	ctx := context.Background()
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	enc, err := encryption.Open(ctx, "base64key://"+base64.StdEncoding.EncodeToString(k))
	if err != nil {
		t.Fatal(err)
	}
	st, err := state.New(memstate.New(), &state.Options{SweepInterval: -1, Encryption: enc})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	// Not offered unless enabled, and listed among the admin tools.
	if slices.Contains(mcpadapter.ToolNames(), "sidecar_erase") {
		t.Error("sidecar_erase is one of the 21 tools")
	}
	if !slices.Contains(mcpadapter.AdminToolNames(), "sidecar_erase") || !slices.Contains(mcpadapter.AdminToolNames(), "sidecar_reset") {
		t.Errorf("AdminToolNames = %v", mcpadapter.AdminToolNames())
	}
	for _, tl := range mcpadapter.Tools(st, nil) {
		if tl.Tool.Name == "sidecar_erase" {
			t.Error("sidecar_erase offered without AllowErase")
		}
	}
	c := connect(t, mcpadapter.NewServer(st, &mcpadapter.Options{AllowErase: true}, server.WithOutputSchemaValidation()))

	if _, err := st.Set(ctx, "alice-profile", "a", state.WithSubject("alice")); err != nil {
		t.Fatal(err)
	}
	c.ok("state_set", `{"key":"shared","value":1}`)
	equal(t, "erase subject", c.ok("sidecar_erase", `{"subject":"alice"}`),
		`{"ok":true,"erased":"subject","records":1,"events":1,"keys_destroyed":true}`)
	equal(t, "erased key", field(t, c.ok("state_get", `{"key":"alice-profile"}`), "found"), "false")
	equal(t, "other key", field(t, c.ok("state_get", `{"key":"shared"}`), "found"), "true")

	msg := c.fail("sidecar_erase", `{}`)
	if !strings.Contains(msg, "confirm_namespace") {
		t.Errorf("namespace erasure without confirmation: %q", msg)
	}
	c.fail("sidecar_erase", `{"confirm_namespace":"other"}`)
	res := c.ok("sidecar_erase", `{"confirm_namespace":"default"}`)
	equal(t, "erased", field(t, res, "erased"), `"namespace"`)
	equal(t, "shared after erasure", field(t, c.ok("state_get", `{"key":"shared"}`), "found"), "false")
	if !strings.Contains(c.ok("history_log", `{}`), "erase.namespace") {
		t.Error("history_log does not show the tombstone")
	}
}

func TestSubjectFromPrincipal(t *testing.T) {
	ctx := context.Background()
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	enc, err := encryption.Open(ctx, "base64key://"+base64.StdEncoding.EncodeToString(k))
	if err != nil {
		t.Fatal(err)
	}
	st, err := state.New(memstate.New(), &state.Options{SweepInterval: -1, Encryption: enc})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c := connect(t, mcpadapter.NewServer(st, &mcpadapter.Options{AllowErase: true, SubjectFromPrincipal: true}, server.WithOutputSchemaValidation()))
	as := func(p string) context.Context {
		return mcpadapter.WithCaller(ctx, mcpadapter.Caller{Principal: p, Access: mcpadapter.AccessAdmin})
	}
	c.okCtx(as("user-1"), "state_set", `{"key":"a","value":1}`)
	c.okCtx(as("user-1"), "session_save", `{"session_id":"s","context":{"x":1}}`)
	c.okCtx(as("user-2"), "state_set", `{"key":"b","value":2}`)
	equal(t, "erase user-1", c.okCtx(as("admin"), "sidecar_erase", `{"subject":"user-1"}`),
		`{"ok":true,"erased":"subject","records":2,"events":2,"keys_destroyed":true}`)
	equal(t, "user-1's key", field(t, c.okCtx(as("admin"), "state_get", `{"key":"a"}`), "found"), "false")
	equal(t, "user-2's key", field(t, c.okCtx(as("admin"), "state_get", `{"key":"b"}`), "found"), "true")
}
