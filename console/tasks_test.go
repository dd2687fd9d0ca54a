package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/matryer/is"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/console"
	"github.com/statesidecar/state/internal/storetest"
	"github.com/statesidecar/state/mcptasks"
)

// TestCancelATaskFromItsPage lists the caller's working task, asks for the
// confirmation, and cancels it: the task is cancelled, as tasks/cancel
// would.
func TestCancelATaskFromItsPage(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	st := storetest.Open(t, storetest.New(t, "memory").URL, &state.Options{SweepInterval: -1})
	srv := server.NewMCPServer("t", "1.0.0", mcptasks.ServerOptions()...)
	srv.AddTool(mcp.NewTool("block"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		<-ctx.Done() // until cancelled
		return nil, ctx.Err()
	})
	tasks, err := mcptasks.New(st, srv, nil)
	is.NoErr(err)
	t.Cleanup(func() { _ = tasks.Close(context.Background()) })
	is.NoErr(tasks.Enable("block"))
	reply, _, _ := tasks.HandleMessage(ctx, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call",
		"params":{"name":"block","arguments":{},"task":{"ttl":60000}}}`), nil)
	var created struct {
		Result struct {
			Task struct {
				TaskID string `json:"taskId"`
			} `json:"task"`
		} `json:"result"`
	}
	is.NoErr(json.Unmarshal(reply, &created))
	id := created.Result.Task.TaskID
	is.True(id != "")

	web := serve(t, st, console.Options{Tasks: tasks,
		TaskOwner: func(*http.Request) (mcptasks.Owner, error) { return mcptasks.Owner{}, nil }})
	code, body := get(t, web.URL+"/ui/tasks")
	is.Equal(code, 200)
	is.True(strings.Contains(body, id))
	is.True(strings.Contains(body, "working"))
	code, body = get(t, web.URL+"/ui/confirm/cancel?task="+url.QueryEscape(id))
	is.Equal(code, 200)
	is.True(strings.Contains(body, "Cancel task "+id))

	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := noRedirect.PostForm(web.URL+"/ui/act/cancel", url.Values{"task": {id}})
	is.NoErr(err)
	res.Body.Close()
	is.Equal(res.StatusCode, http.StatusSeeOther)
	got, err := tasks.Get(ctx, mcptasks.Owner{}, id)
	is.NoErr(err)
	is.Equal(got.Status, "cancelled")

	// Cancelling it again is refused: it has finished.
	res, err = noRedirect.PostForm(web.URL+"/ui/act/cancel", url.Values{"task": {id}})
	is.NoErr(err)
	res.Body.Close()
	is.Equal(res.StatusCode, http.StatusConflict)
}
