package layout

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
		{Status: Created, Name: "job", Tags: map[string]string{}, CreatedAt: 1893456000000, UpdatedAt: 1893456000000},
		{Status: Running, AgentID: "worker-1", LastStep: 1 << 53, Attempt: 3, Fence: 7, UpdatedAt: 1, ClaimExpiresAt: 2,
			ClaimTTL: 600000, Name: "pr-review", Tags: map[string]string{"pipeline": "pr", "repo": "org/app"}, CreatedAt: -5},
		{Status: Claimed, AgentID: `agent "A" <&>`, Name: "job \"<1>\"", Tags: map[string]string{"a<b>": "&\u2028\"\\/\t\x01", "é": "ü"}},
		{Status: Done, Name: "x", Tags: nil},
		{Status: Waiting, Parent: "wf-000000000001", Join: true, Name: "agg", Tags: map[string]string{}},
		{Status: Claimed, AgentID: "a", ClaimExpiresAt: 5, ClaimTTL: 5, Parent: `p "q" <&>`, Name: "child", Tags: map[string]string{}},
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
	v := RunValue{Status: Running, AgentID: "worker-12", LastStep: 1, Attempt: 1, Fence: 1, UpdatedAt: 1893456000000,
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
	if ChildIndex("p") == ChildIndex("p/a")[:len(ChildIndex("p"))] {
		t.Error("the child index of p is a prefix of the child index of p/a")
	}
}
