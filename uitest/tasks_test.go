package uitest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
)

// startTask calls state_wait as an MCP task (2025-11-25) on a key nobody
// writes, without a timeout, so that the task works until its TTL (ten
// minutes) or a cancel, and returns its id.
func startTask(t *testing.T, baseURL string) string {
	t.Helper()
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"state_wait",` +
		`"arguments":{"key":"never-written"},"task":{"ttl":600000}}}`)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/mcp", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if i := bytes.Index(b, []byte("data: ")); i >= 0 {
		b = b[i+len("data: "):]
	}
	var reply struct {
		Result struct {
			Task struct {
				TaskID string `json:"taskId"`
				Status string `json:"status"`
			} `json:"task"`
		} `json:"result"`
	}
	if err := json.Unmarshal(b, &reply); err != nil || reply.Result.Task.TaskID == "" {
		t.Fatalf("tools/call as a task: HTTP %d %s (%v)", res.StatusCode, b, err)
	}
	return reply.Result.Task.TaskID
}

// TestConsoleCancelsATask finds a working MCP task on the tasks page and
// cancels it behind a confirmation, first backing out once: the page then
// shows it cancelled, with nothing left to cancel.
func TestConsoleCancelsATask(t *testing.T) {
	backends(t, func(t *testing.T, backend string) {
		p := newPage(t)
		srv := startSidecar(t, backend)
		id := startTask(t, srv.URL)

		p.open(srv.URL + "/ui/")
		p.click(`header nav a[href="/ui/tasks"]`)
		row := fmt.Sprintf(`#tasks tr[data-id=%q]`, id)
		p.seenText(row, "state_wait")
		p.seenText(row+" .status", "working")
		p.screenshot("tasks")

		p.click(row + " a.button")
		p.seenText("#confirm", "Cancel task "+id)
		p.click("#confirm-no")
		p.seenText(row+" .status", "working") // backed out: nothing changed

		p.click(row + " a.button")
		p.click("#confirm-yes")
		p.seenText("#flash", "Cancelled task "+id)
		p.seenText(row+" .status", "cancelled")
		p.unseen(row + " a.button")
	})
}
