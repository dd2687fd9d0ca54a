package mcpadapter_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/statesidecar/state/mcpadapter"
)

// create makes a run and returns its id.
func (m *mcpc) create(name, tags string) string {
	m.t.Helper()
	args := `{"name":"` + name + `"}`
	if tags != "" {
		args = `{"name":"` + name + `","tags":` + tags + `}`
	}
	res := m.ok("workflow_create", args)
	id := str(m.t, res, "run_id")
	equal(m.t, "workflow_create", res, `{"run_id":"`+id+`","name":"`+name+`","status":"created","replayed":false}`)
	if !regexp.MustCompile(`^wf-[0-9a-f]{12}$`).MatchString(id) {
		m.t.Errorf("run_id %q is not wf- and 12 lowercase hex digits", id)
	}
	return id
}

func TestWorkflowLifecycle(t *testing.T) {
	c, _, clk := newClient(t, nil)
	id := c.create("pr-review-42", `{"pipeline":"pr-review","pr":"42"}`)
	created := `{"run_id":"` + id + `","name":"pr-review-42","status":"created","tags":{"pipeline":"pr-review","pr":"42"},` +
		`"agent_id":null,"last_step":0,"created_at":` + epoch + `.0,"updated_at":` + epoch + `.0,"attempt":0,"fence":null,"claim_expires_at":null}`
	equal(t, "workflow_discover", c.ok("workflow_discover", `{"tags":{"pipeline":"pr-review"},"status":"created"}`),
		`{"runs":[`+created+`],"next_cursor":null}`)
	equal(t, "workflow_status", c.ok("workflow_status", `{"run_id":"`+id+`"}`),
		`{"run_id":"`+id+`","status":"created","last_step":0,"agent_id":null,"created_at":`+epoch+`.0,"updated_at":`+epoch+`.0,"attempt":0,"fence":null,"claim_expires_at":null,"parent_run_id":null,"join":false,"children":null}`)

	clk.Advance(time.Second)
	equal(t, "workflow_claim", c.ok("workflow_claim", `{"run_id":"`+id+`","agent_id":"worker-A","claim_ttl_seconds":60}`),
		`{"claimed":true,"run_id":"`+id+`","agent_id":"worker-A","reason":null,"fence":1,"attempt":1,"expires_at":1893456061.0}`)
	equal(t, "workflow_claim by another worker", c.ok("workflow_claim", `{"run_id":"`+id+`","agent_id":"worker-B"}`),
		`{"claimed":false,"run_id":"`+id+`","agent_id":null,"reason":"Workflow is in status 'claimed' (agent: worker-A)","fence":null,"attempt":null,"expires_at":null}`)

	clk.Advance(time.Second)
	equal(t, "checkpoint 1", c.ok("workflow_checkpoint", `{"run_id":"`+id+`","step":1,"output":{"files":12},"agent_id":"worker-A","fence":1}`),
		`{"ok":true,"run_id":"`+id+`","step":1}`)
	equal(t, "claim expiry after the checkpoint heartbeat",
		field(t, c.ok("workflow_status", `{"run_id":"`+id+`"}`), "claim_expires_at"), "1893456062.0")
	c.ok("workflow_checkpoint", `{"run_id":"`+id+`","step":10,"output":[1,2]}`)
	c.ok("workflow_checkpoint", `{"run_id":"`+id+`","step":2,"output":"two"}`)
	c.ok("workflow_checkpoint", `{"run_id":"`+id+`","step":0,"output":null}`)

	res := c.ok("workflow_resume", `{"run_id":"`+id+`"}`)
	equal(t, "resume step_outputs", field(t, res, "step_outputs"), `{"0":null,"1":{"files":12},"2":"two","10":[1,2]}`)
	equal(t, "resume last_step", field(t, res, "last_step"), "10")
	equal(t, "resume meta", field(t, res, "meta"),
		`{"run_id":"`+id+`","name":"pr-review-42","status":"running","tags":{"pipeline":"pr-review","pr":"42"},"agent_id":"worker-A","last_step":10,`+
			`"created_at":`+epoch+`.0,"updated_at":1893456002.0,"attempt":1,"fence":1,"claim_expires_at":1893456062.0}`)

	equal(t, "finish", c.ok("workflow_checkpoint", `{"run_id":"`+id+`","step":11,"output":"LGTM","agent_id":"worker-A","fence":1,"status":"done"}`),
		`{"ok":true,"run_id":"`+id+`","step":11}`)
	equal(t, "status after finishing", field(t, c.ok("workflow_status", `{"run_id":"`+id+`"}`), "status"), `"done"`)
	equal(t, "replay of the finishing checkpoint",
		c.ok("workflow_checkpoint", `{"run_id":"`+id+`","step":11,"output":"LGTM","status":"done"}`), `{"ok":true,"run_id":"`+id+`","step":11}`)
	c.wantErr("workflow_checkpoint", `{"run_id":"`+id+`","step":12,"output":1}`,
		"Workflow is in status 'done' (agent: worker-A); the run is finished and accepts no more checkpoints")
	equal(t, "claim of a finished run", field(t, c.ok("workflow_claim", `{"run_id":"`+id+`","agent_id":"worker-B"}`), "reason"),
		`"Workflow is in status 'done' (agent: worker-A)"`)
	if list := c.ok("workflow_list", ``); !strings.HasPrefix(list, `{"runs":[{"run_id":"`+id+`","name":"pr-review-42","status":"done"`) {
		t.Errorf("workflow_list = %s, want the finished run", list)
	}
}

func TestWorkflowCrashRecovery(t *testing.T) {
	c, _, clk := newClient(t, nil)
	id := c.create("job", "")
	c.ok("workflow_claim", `{"run_id":"`+id+`","agent_id":"A","claim_ttl_seconds":10}`)
	c.ok("workflow_checkpoint", `{"run_id":"`+id+`","step":1,"output":"a1","agent_id":"A","fence":1}`)
	equal(t, "heartbeat claim by the holder", c.ok("workflow_claim", `{"run_id":"`+id+`","agent_id":"A","claim_ttl_seconds":10}`),
		`{"claimed":true,"run_id":"`+id+`","agent_id":"A","reason":null,"fence":1,"attempt":1,"expires_at":1893456010.0}`)
	equal(t, "claimable while the claim is live", c.ok("workflow_discover", `{"claimable":true}`), `{"runs":[],"next_cursor":null}`)

	clk.Advance(10 * time.Second) // A crashed: no heartbeat
	disc := c.ok("workflow_discover", `{"claimable":true,"status":""}`)
	if !strings.Contains(disc, id) {
		t.Fatalf("claimable runs %s do not include the crashed run %s", disc, id)
	}
	equal(t, "takeover", c.ok("workflow_claim", `{"run_id":"`+id+`","agent_id":"B"}`),
		`{"claimed":true,"run_id":"`+id+`","agent_id":"B","reason":null,"fence":2,"attempt":2,"expires_at":1893456610.0}`)
	equal(t, "outputs survive the takeover", field(t, c.ok("workflow_resume", `{"run_id":"`+id+`"}`), "step_outputs"), `{"1":"a1"}`)

	c.wantErr("workflow_checkpoint", `{"run_id":"`+id+`","step":2,"output":"stale","agent_id":"A","fence":1}`,
		"not held by the caller: held by 'B' with fence 2; your claim on this run expired or was taken over by another agent: stop working on it, or call workflow_claim to claim it again")
	c.wantErr("workflow_checkpoint", `{"run_id":"`+id+`","step":2,"output":"stale","fence":1}`,
		"not held by the caller: held by 'B' with fence 2; your claim on this run expired or was taken over by another agent: stop working on it, or call workflow_claim to claim it again")
	equal(t, "outputs after the stale writes", field(t, c.ok("workflow_resume", `{"run_id":"`+id+`"}`), "step_outputs"), `{"1":"a1"}`)
	c.ok("workflow_checkpoint", `{"run_id":"`+id+`","step":2,"output":"b2","agent_id":"B","fence":2,"status":"failed"}`)
	equal(t, "failed run", field(t, c.ok("workflow_status", `{"run_id":"`+id+`"}`), "status"), `"failed"`)
}

func TestWorkflowUnknownRun(t *testing.T) {
	c, _, _ := newClient(t, nil)
	const id = "wf-000000000000"
	for _, tool := range []string{"workflow_resume", "workflow_status"} {
		c.wantErr(tool, `{"run_id":"`+id+`"}`, "Workflow '"+id+"' not found")
	}
	c.wantErr("workflow_checkpoint", `{"run_id":"`+id+`","step":1,"output":1}`, "Workflow '"+id+"' not found")
	equal(t, "claim of an unknown run", c.ok("workflow_claim", `{"run_id":"`+id+`","agent_id":"A"}`),
		`{"claimed":false,"run_id":"`+id+`","agent_id":null,"reason":"Workflow '`+id+`' not found","fence":null,"attempt":null,"expires_at":null}`)
}

func TestWorkflowOutputKeepsEveryDigit(t *testing.T) {
	c, _, _ := newClient(t, nil)
	id := c.create("big", "")
	const out = `{"n":12345678901234567890123,"m":-9007199254740993}`
	c.ok("workflow_checkpoint", `{"run_id":"`+id+`","step":9007199254740992,"output":`+out+`}`)
	res := c.ok("workflow_resume", `{"run_id":"`+id+`"}`)
	equal(t, "step_outputs", field(t, res, "step_outputs"), `{"9007199254740992":`+out+`}`)
	equal(t, "last_step", field(t, res, "last_step"), "9007199254740992")
}

func TestWorkflowPagination(t *testing.T) {
	c, _, clk := newClient(t, nil)
	var ids []string
	for i := range 5 {
		ids = append(ids, c.create(fmt.Sprint("r", i), `{"i":"`+fmt.Sprint(i%2)+`"}`))
		clk.Advance(time.Millisecond)
	}
	var got []string
	cursor := ""
	for range 5 {
		args := `{"limit":2}`
		if cursor != "" {
			args = `{"limit":2,"cursor":"` + cursor + `"}`
		}
		res := c.ok("workflow_list", args)
		for _, id := range ids {
			if strings.Contains(res, id) {
				got = append(got, id)
			}
		}
		if field(t, res, "next_cursor") == "null" {
			break
		}
		cursor = str(t, res, "next_cursor")
	}
	if len(got) != 5 {
		t.Fatalf("pages listed %d runs, want 5", len(got))
	}
	res := c.ok("workflow_discover", `{"tags":{"i":"0"},"limit":1}`)
	if !strings.Contains(res, ids[4]) || field(t, res, "next_cursor") == "null" {
		t.Errorf("first page of discover(i=0) = %s, want the newest run %s and a cursor", res, ids[4])
	}
}

func TestWorkflowClaimTTLOption(t *testing.T) {
	c, _, _ := newClient(t, &mcpadapter.Options{ClaimTTL: 90 * time.Second})
	id := c.create("job", "")
	equal(t, "claim expiry with Options.ClaimTTL", field(t, c.ok("workflow_claim", `{"run_id":"`+id+`","agent_id":"A"}`), "expires_at"),
		"1893456090.0")
	equal(t, "claim_ttl_seconds overrides it", field(t, c.ok("workflow_claim", `{"run_id":"`+id+`","agent_id":"A","claim_ttl_seconds":0.5}`), "expires_at"),
		"1893456000.5")
}

// TestRacingClaims has workers race for one run through the tools: exactly
// one wins, and every loser is told who did.
func TestRacingClaims(t *testing.T) {
	c, _, _ := newClient(t, nil)
	id := c.create("job", "")
	const workers = 8
	results := make(chan string, workers)
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			var req mcp.CallToolRequest
			req.Params.Name = "workflow_claim"
			req.Params.Arguments = json.RawMessage(fmt.Sprintf(`{"run_id":%q,"agent_id":"w%d"}`, id, i))
			res, err := c.c.CallTool(t.Context(), req)
			switch {
			case err != nil:
				results <- "error: " + err.Error()
			case res.IsError:
				results <- "tool error"
			default:
				results <- res.Content[0].(mcp.TextContent).Text
			}
		})
	}
	wg.Wait()
	close(results)
	winners, winner := 0, ""
	var losers []string
	for r := range results {
		if strings.HasPrefix(r, `{"claimed":true`) {
			winners++
			winner = str(t, r, "agent_id")
		} else {
			losers = append(losers, r)
		}
	}
	if winners != 1 {
		t.Fatalf("%d workers won the claim, want exactly 1; losers: %v", winners, losers)
	}
	for _, r := range losers {
		if got, want := field(t, r, "reason"), `"Workflow is in status 'claimed' (agent: `+winner+`)"`; got != want {
			t.Errorf("loser's reason %s, want %s", got, want)
		}
	}
}

func TestWorkflowJoinAndIdempotentCreate(t *testing.T) {
	c, _, _ := newClient(t, nil)
	res := c.ok("workflow_create", `{"name":"aggregate","join":true,"idempotency_key":"fanout-1"}`)
	parent := str(t, res, "run_id")
	equal(t, "join parent status", field(t, res, "status"), `"waiting"`)
	again := c.ok("workflow_create", `{"name":"aggregate","join":true,"idempotency_key":"fanout-1"}`)
	equal(t, "retried create", again, strings.Replace(res, `"replayed":false`, `"replayed":true`, 1))
	var kids []string
	for range 2 {
		kids = append(kids, str(t, c.ok("workflow_create", `{"name":"piece","parent_run_id":"`+parent+`"}`), "run_id"))
	}
	equal(t, "claim of a waiting parent", field(t, c.ok("workflow_claim", `{"run_id":"`+parent+`","agent_id":"agg"}`), "claimed"), "false")
	if field(t, c.ok("workflow_discover", `{"parent_run_id":"`+parent+`","claimable":true}`), "runs") == "[]" {
		t.Error("workflow_discover(parent_run_id) found no children")
	}
	c.ok("workflow_checkpoint", `{"run_id":"`+kids[0]+`","step":1,"output":1,"status":"done"}`)
	status := c.ok("workflow_status", `{"run_id":"`+parent+`"}`)
	equal(t, "children", field(t, status, "children"), `{"claimed":0,"created":1,"done":1,"failed":0,"running":0,"waiting":0}`)
	equal(t, "still waiting", field(t, status, "status"), `"waiting"`)
	c.ok("workflow_checkpoint", `{"run_id":"`+kids[1]+`","step":1,"output":1,"status":"failed"}`)
	equal(t, "released", field(t, c.ok("workflow_status", `{"run_id":"`+parent+`"}`), "status"), `"created"`)
	equal(t, "aggregator claims", field(t, c.ok("workflow_claim", `{"run_id":"`+parent+`","agent_id":"agg"}`), "claimed"), "true")
	c.wantErr("workflow_create", `{"name":"late","parent_run_id":"`+parent+`"}`, `parent_run_id "`+parent+`": the join parent was released to its aggregator (status claimed) and takes no more children; create another join parent`)
	c.wantErr("workflow_create", `{"name":"orphan","parent_run_id":"wf-000000000000"}`, `parent_run_id "wf-000000000000": no such run`)
}
