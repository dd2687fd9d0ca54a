package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// story tells the tale: two replicas over one SQLite file, a render task
// started on the first, polled on the second, the first killed after
// killAt frames, the second finishing the task.
func story(ctx context.Context, w io.Writer, frames int, frameTime time.Duration, killAt int) error {
	dir, err := os.MkdirTemp("", "tasks-example-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	storeURL := "sqlite://" + filepath.Join(dir, "tasks.db")
	a, err := startReplica(ctx, storeURL, "replica-a")
	if err != nil {
		return err
	}
	defer a.stop()
	b, err := startReplica(ctx, storeURL, "replica-b")
	if err != nil {
		return err
	}
	defer b.stop()
	fmt.Fprintf(w, "two replicas over %s: replica-a and replica-b\n", filepath.Base(storeURL))

	c := &client{http: &http.Client{Timeout: time.Minute}}
	res, err := c.call(ctx, a.url, "tools/call", map[string]any{"name": "render",
		"arguments": map[string]any{"frames": frames, "frame_ms": frameTime.Milliseconds()},
		"task":      map[string]any{"ttl": 600_000}})
	if err != nil {
		return err
	}
	var created struct {
		Task struct {
			TaskID string `json:"taskId"`
			Status string `json:"status"`
		} `json:"task"`
	}
	if err := json.Unmarshal(res, &created); err != nil || created.Task.TaskID == "" {
		return fmt.Errorf("tools/call did not return a task: %s", res)
	}
	id := created.Task.TaskID
	fmt.Fprintf(w, "replica-a accepted render(%d frames) as task %s…: %s\n", frames, id[:8], created.Task.Status)

	last := ""
	poll := func(url string) (status, msg string, err error) {
		res, err := c.call(ctx, url, "tasks/get", map[string]any{"taskId": id})
		if err != nil {
			return "", "", err
		}
		var t struct{ Status, StatusMessage string }
		_ = json.Unmarshal(res, &t)
		if t.StatusMessage != last && t.StatusMessage != "" {
			fmt.Fprintf(w, "  tasks/get on replica-b: %s, %s\n", t.Status, t.StatusMessage)
			last = t.StatusMessage
		}
		return t.Status, t.StatusMessage, nil
	}
	// Poll on replica-b (any replica answers) until replica-a drew killAt
	// frames, then kill replica-a without warning.
	want := fmt.Sprintf("frame %d of %d drawn by replica-a", killAt, frames)
	for {
		_, msg, err := poll(b.url)
		if err != nil {
			return err
		}
		if strings.HasPrefix(msg, want) {
			break
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	_ = a.cmd.Wait()
	fmt.Fprintf(w, "replica-a killed (SIGKILL) after frame %d: its claim on the task expires, replica-b takes over\n", killAt)
	for {
		status, _, err := poll(b.url)
		if err != nil {
			return err
		}
		if status != "working" {
			break
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	res, err = c.call(ctx, b.url, "tasks/result", map[string]any{"taskId": id})
	if err != nil {
		return err
	}
	var result struct {
		Content []struct{ Text string } `json:"content"`
		IsError bool                    `json:"isError"`
	}
	if err := json.Unmarshal(res, &result); err != nil || len(result.Content) == 0 || result.IsError {
		return fmt.Errorf("tasks/result: %s", res)
	}
	fmt.Fprintf(w, "tasks/result on replica-b: %s\n", result.Content[0].Text)
	return nil
}

// A replica is a server process of this program.
type replica struct {
	cmd *exec.Cmd
	url string
}

func startReplica(ctx context.Context, storeURL, name string) (*replica, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "serve", "-store", storeURL, "-name", name)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	r := &replica{cmd: cmd}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case l, ok := <-lines:
		var m struct{ URL string }
		if !ok || json.Unmarshal([]byte(l), &m) != nil || m.URL == "" {
			r.stop()
			return nil, fmt.Errorf("%s did not start: %q", name, l)
		}
		r.url = m.URL
		return r, nil
	case <-time.After(time.Minute):
		r.stop()
		return nil, fmt.Errorf("%s did not start within a minute", name)
	case <-ctx.Done():
		r.stop()
		return nil, ctx.Err()
	}
}

// stop ends the replica gracefully (a killed one is gone already).
func (r *replica) stop() {
	if r.cmd.ProcessState != nil {
		return
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = r.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = r.cmd.Process.Kill()
		<-done
	}
}

// A client speaks MCP 2025-11-25 as raw JSON-RPC over HTTP.
type client struct {
	http *http.Client
	id   int
}

// call sends method with params to url and returns the result.
func (c *client) call(ctx context.Context, url, method string, params any) (json.RawMessage, error) {
	c.id++
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.id, "method": method, "params": params})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	res, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	if i := bytes.Index(b, []byte("data: ")); bytes.HasPrefix(b, []byte("event:")) && i >= 0 {
		b = b[i+len("data: "):]
	}
	var m struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: HTTP %d: %q", method, res.StatusCode, b)
	}
	if m.Error != nil {
		return nil, fmt.Errorf("%s: %d %s", method, m.Error.Code, m.Error.Message)
	}
	return m.Result, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
