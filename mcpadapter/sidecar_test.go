package mcpadapter_test

import (
	"testing"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/mcpadapter"
)

func TestSidecarHealth(t *testing.T) {
	c, _, _ := newClient(t, nil)
	c.ok("state_set", `{"key":"k","value":1}`)
	c.ok("lease_acquire", `{"resource_id":"r","holder_id":"A","ttl_seconds":1}`)
	id := c.create("job", "")
	c.ok("workflow_claim", `{"run_id":"`+id+`","agent_id":"A"}`)
	c.create("job2", "")
	c.ok("session_save", `{"session_id":"s","context":{}}`)
	res := c.ok("sidecar_health", ``)
	// uptime_s is measured by the process clock: take it as it is.
	equal(t, "sidecar_health", res, `{"status":"ok","backend":"memory","uptime_s":`+field(t, res, "uptime_s")+
		`,"key_count":1,"workflow_count":2,"version":"`+state.Version+`","lease_count":1,"session_count":1,"history_count":6,`+
		`"workflows_by_status":{"created":1,"claimed":1,"running":0,"done":0,"failed":0},"namespace":"default"}`)
}

func TestSidecarReset(t *testing.T) {
	c, _, _ := newClient(t, nil)
	c.ok("state_set", `{"key":"k","value":1}`)
	c.wantErr("sidecar_reset", ``, "sidecar_reset is disabled on this server because it irreversibly deletes all state; "+
		"its operator can enable it (mcpadapter Options.AllowReset; SIDECAR_ALLOW_RESET=true for the sidecar)")
	equal(t, "key after a refused reset", field(t, c.ok("state_get", `{"key":"k"}`), "found"), "true")

	c, _, _ = newClient(t, &mcpadapter.Options{AllowReset: true})
	c.ok("state_set", `{"key":"k","value":1}`)
	c.ok("state_set", `{"key":"k2","value":1}`)
	equal(t, "sidecar_reset", c.ok("sidecar_reset", `{}`), `{"ok":true,"cleared":4}`) // 2 entries, 2 history events
	equal(t, "key after reset", field(t, c.ok("state_get", `{"key":"k"}`), "found"), "false")
	equal(t, "second reset", c.ok("sidecar_reset", ``), `{"ok":true,"cleared":0}`)
}
