package backend

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestDecodeRunAgreesWithEncodingJSON decodes runs both ways: what
// json.Marshal writes (parsed directly), and anything else (left to
// encoding/json), must give what json.Unmarshal gives.
func TestDecodeRunAgreesWithEncodingJSON(t *testing.T) {
	runs := []RunValue{
		{Status: RunCreated, Name: "job", Tags: map[string]string{}, CreatedAt: 1893456000000, UpdatedAt: 1893456000000},
		{Status: RunRunning, AgentID: "worker-1", LastStep: 1 << 53, Attempt: 3, Fence: 7, UpdatedAt: 1, ClaimExpiresAt: 2,
			ClaimTTL: 600000, Name: "pr-review", Tags: map[string]string{"pipeline": "pr", "repo": "org/app"}, CreatedAt: -5},
		{Status: RunClaimed, AgentID: `agent "A" <&>`, Name: "job \"<1>\"", Tags: map[string]string{"a<b>": "&\u2028\"\\/\t\x01", "é": "ü"}},
		{Status: RunDone, Name: "x", Tags: nil},
		{Status: RunWaiting, Parent: "wf-000000000001", Join: true, Name: "agg", Tags: map[string]string{}},
		{Status: RunClaimed, AgentID: "a", ClaimExpiresAt: 5, ClaimTTL: 5, Parent: `p "q" <&>`, Name: "child", Tags: map[string]string{}},
	}
	for _, v := range runs {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		check(t, b)
	}
	for _, s := range []string{
		`{"status":"created","last_step":0,"attempt":0,"fence":0,"updated_at":0,"name":"j","tags":{},"created_at":0,"parent":"wf-1"}`,
		`{"status":"waiting","last_step":0,"attempt":0,"fence":0,"updated_at":0,"join":false,"name":"j","tags":{},"created_at":0}`,
		`{"name":"j","status":"running","last_step":1,"attempt":1,"fence":1,"updated_at":0,"tags":{"k":"v"},"created_at":0}`,
		`{"status":"created","last_step":1.5,"attempt":0,"fence":0,"updated_at":0,"name":"j","tags":{},"created_at":0}`,
		`{"status":"created","last_step":99999999999999999999,"attempt":0,"fence":0,"updated_at":0,"name":"j","tags":{},"created_at":0}`,
		`{"status":"created","last_step":0,"attempt":0,"fence":0,"updated_at":0,"name":"j","tags":{"k":"v","k2":"v2"},"created_at":0} `,
	} {
		check(t, []byte(s))
	}
	if _, err := DecodeRun([]byte(`{"status":`)); err == nil {
		t.Error("a truncated run decoded without error")
	}
}

func check(t *testing.T, b []byte) {
	t.Helper()
	want := new(RunValue)
	wantErr := json.Unmarshal(b, want)
	got, err := DecodeRun(b)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("DecodeRun(%s): error %v, encoding/json: %v", b, err, wantErr)
	}
	if err == nil && !reflect.DeepEqual(got, want) {
		t.Errorf("DecodeRun(%s):\n got %+v\nwant %+v", b, got, want)
	}
}

func BenchmarkDecodeRun(b *testing.B) {
	v := RunValue{Status: RunRunning, AgentID: "worker-12", LastStep: 1, Attempt: 1, Fence: 1, UpdatedAt: 1893456000000,
		ClaimExpiresAt: 1893456000000, ClaimTTL: 86400000, Name: "job", Tags: map[string]string{"pipeline": "p03", "team": "t4"},
		CreatedAt: 1893456000000}
	val, _ := json.Marshal(v)
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			if _, err := DecodeRun(val); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			var r RunValue
			if err := json.Unmarshal(val, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func TestEscapeIDKeepsParentsApart(t *testing.T) {
	for id, want := range map[string]string{
		"wf-0123abcdef": "wf-0123abcdef",
		"p/a":           "p%2Fa",
		"ä \"q\"%":      "%C3%A4%20%22q%22%25",
		"A.b_c~d-e":     "A.b_c~d-e",
		"p%2Fa":         "p%252Fa",
	} {
		if got := EscapeID(id); got != want {
			t.Errorf("EscapeID(%q) = %q, want %q", id, got, want)
		}
	}
	if p, pa := ClaimedChildrenKey("p"), ClaimedChildrenKey("p/a"); pa[:len(p)-len(RunClaimed)] == p[:len(p)-len(RunClaimed)] {
		t.Errorf("the counters of p (%s) and of p/a (%s) share the prefix of p's", p, pa)
	}
}

// TestSplitRunKeepsEveryByte splits the runs encoding/json writes into
// head and tail: the head holds what DecodeRun reads of those fields (the
// agent as its JSON text), and AppendRun gives the value back byte for
// byte. Values not as encoding/json writes them are refused.
func TestSplitRunKeepsEveryByte(t *testing.T) {
	runs := []RunValue{
		{Status: RunCreated, Name: "job", Tags: map[string]string{}, CreatedAt: 1893456000000, UpdatedAt: 1893456000000},
		{Status: RunRunning, AgentID: "worker-1", LastStep: 1 << 53, Attempt: 3, Fence: 7, UpdatedAt: 1, ClaimExpiresAt: 2,
			ClaimTTL: 600000, Name: "pr-review", Tags: map[string]string{"pipeline": "pr", "repo": "org/app"}, CreatedAt: -5},
		{Status: RunClaimed, AgentID: "agent \"A\" <&>\u2028\\", ClaimExpiresAt: 9, Name: "job \"<1>\"",
			Tags: map[string]string{"a<b>": "&\u2028\"\\/\t\x01", "é": "ü"}},
		{Status: RunWaiting, Parent: "wf-000000000001", Join: true, Name: "agg", Tags: map[string]string{}},
		{Status: RunClaimed, AgentID: "a", ClaimExpiresAt: 5, ClaimTTL: 5, Parent: `p "q" <&>`, Name: "child", Tags: map[string]string{}},
		{Status: RunDone, LastStep: -3, Name: "", Tags: nil},
	}
	for _, v := range runs {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		h, tail, ok := SplitRun(b)
		if !ok {
			t.Fatalf("SplitRun(%s) refused a run encoding/json wrote", b)
		}
		agent, _ := json.Marshal(v.AgentID)
		if v.AgentID == "" {
			agent = nil
		}
		want := RunHead{Status: v.Status, AgentJSON: string(agent), LastStep: v.LastStep, Attempt: v.Attempt, Fence: v.Fence,
			UpdatedAt: v.UpdatedAt, ClaimExpiresAt: v.ClaimExpiresAt, ClaimTTL: v.ClaimTTL, Parent: v.Parent}
		if h != want {
			t.Errorf("SplitRun(%s) head:\n got %+v\nwant %+v", b, h, want)
		}
		if got := AppendRun(nil, &h, tail); string(got) != string(b) {
			t.Errorf("AppendRun(SplitRun(%s)) = %s", b, got)
		}
	}
	for _, s := range []string{
		`{"name":"j","status":"running","last_step":1,"attempt":1,"fence":1,"updated_at":0,"tags":{},"created_at":0}`,
		`{"status":"created","agent_id":"","last_step":0,"attempt":0,"fence":0,"updated_at":0,"name":"j","tags":{},"created_at":0}`,
		`{"status":"created","last_step":-0,"attempt":0,"fence":0,"updated_at":0,"name":"j","tags":{},"created_at":0}`,
		`{"status":"created","last_step":0,"attempt":0,"fence":0,"updated_at":0,"claim_expires_at":0,"name":"j","tags":{},"created_at":0}`,
		`{"status":"creat\u0065d","last_step":0,"attempt":0,"fence":0,"updated_at":0,"name":"j","tags":{},"created_at":0}`,
		`{"status":"created","last_step":0,"attempt":0,"fence":0,"updated_at":0}`,
		`{"status":"created","last_step":0,"attempt":0,"fence":0,"updated_at":0,"parent_run_id":"","name":"j","tags":{},"created_at":0}`,
	} {
		if _, _, ok := SplitRun([]byte(s)); ok {
			t.Errorf("SplitRun(%s) accepted a value encoding/json does not write", s)
		}
	}
}

// FuzzSplitRun checks SplitRun's promise on any input: what it accepts,
// AppendRun writes back byte for byte, and its head agrees with DecodeRun.
func FuzzSplitRun(f *testing.F) {
	f.Add([]byte(`{"status":"claimed","agent_id":"a\"b","last_step":3,"attempt":1,"fence":1,"updated_at":5,"claim_expires_at":9,"claim_ttl_ms":4,"parent_run_id":"wf-1","name":"j","tags":{"k":"v"},"created_at":0}`))
	f.Add([]byte(`{"status":"created","last_step":0,"attempt":0,"fence":0,"updated_at":0,"join":true,"name":"j","tags":{},"created_at":0}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, tail, ok := SplitRun(b)
		if !ok {
			return
		}
		if got := AppendRun(nil, &h, tail); string(got) != string(b) {
			t.Fatalf("AppendRun(SplitRun(%q)) = %q", b, got)
		}
		v, err := DecodeRun(b)
		if err != nil {
			return // the tail is not SplitRun's to check
		}
		var agent string
		if h.AgentJSON != "" {
			if err := json.Unmarshal([]byte(h.AgentJSON), &agent); err != nil {
				t.Fatalf("agent %q of %q is not a JSON string: %v", h.AgentJSON, b, err)
			}
		}
		if v.Status != h.Status || v.AgentID != agent || v.LastStep != h.LastStep || v.Attempt != h.Attempt ||
			v.Fence != h.Fence || v.UpdatedAt != h.UpdatedAt || v.ClaimExpiresAt != h.ClaimExpiresAt ||
			v.ClaimTTL != h.ClaimTTL || v.Parent != h.Parent {
			t.Fatalf("SplitRun(%q) = %+v, DecodeRun %+v", b, h, v)
		}
	})
}
