package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/statesidecar/state"
	_ "github.com/statesidecar/state/backend/pgstate"
	_ "github.com/statesidecar/state/backend/redisstate"
	_ "github.com/statesidecar/state/backend/sqlitestate"
	"github.com/statesidecar/state/mcptasks"
)

// serve runs one replica: the MCP server with its render tool, its tasks
// over the store at -store, on Streamable HTTP at -addr. It prints one
// JSON line, {"url": ...}, once it listens.
func serve(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("tasks serve", flag.ContinueOnError)
	storeURL := fs.String("store", "sqlite:///tmp/tasks-example.db", "store URL (sqlite://, redis://, postgres://)")
	addr := fs.String("addr", "127.0.0.1:0", "HTTP address")
	claimTTL := fs.Duration("claim-ttl", 2*time.Second, "how long after its last heartbeat a dead replica's task is taken over")
	name := fs.String("name", "replica", "this replica's name, in the results it writes")
	if err := fs.Parse(args); err != nil {
		return err
	}
	st, err := state.Open(ctx, *storeURL)
	if err != nil {
		return err
	}
	defer st.Close()

	s := server.NewMCPServer("render-server", "1.0.0", append(mcptasks.ServerOptions(), server.WithRecovery())...)
	s.AddTool(mcp.NewTool("render",
		mcp.WithDescription("Render an animation, one frame at a time; slow, so call it as a task."),
		mcp.WithNumber("frames", mcp.Required(), mcp.Description("How many frames.")),
		mcp.WithNumber("frame_ms", mcp.Description("How long a frame takes, in milliseconds.")),
		mcp.WithReadOnlyHintAnnotation(false), mcp.WithDestructiveHintAnnotation(false),
		mcp.WithIdempotentHintAnnotation(true), mcp.WithOpenWorldHintAnnotation(false),
	), render(*name))
	tasks, err := mcptasks.New(st, s, &mcptasks.Options{ClaimTTL: *claimTTL, SweepInterval: *claimTTL / 4,
		PollInterval: 200 * time.Millisecond})
	if err != nil {
		return err
	}
	if err := tasks.Enable("render"); err != nil {
		return err
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", tasks.Handler(server.NewStreamableHTTPServer(s, server.WithStateLess(true), server.WithDisableStreaming(true))))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	line, _ := json.Marshal(map[string]string{"url": "http://" + ln.Addr().String() + "/mcp"})
	fmt.Println(string(line))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	// A graceful stop hands the tasks over to the other replicas at once.
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = tasks.Close(sctx)
	err = srv.Shutdown(sctx)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// render is the slow tool: it draws frames one by one, saving the number
// of frames drawn as the task's checkpoint and telling its progress in the
// task's statusMessage. A replica that takes the task over starts after
// the last frame saved.
func render(replica string) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		frames := req.GetInt("frames", 0)
		if frames < 1 || frames > 1000 {
			return mcp.NewToolResultError("frames must be between 1 and 1000"), nil
		}
		frameTime := time.Duration(req.GetInt("frame_ms", 400)) * time.Millisecond
		ex, isTask := mcptasks.FromContext(ctx)
		from := 0
		if isTask {
			if cp, ok, err := ex.LastCheckpoint(ctx); err != nil {
				return nil, err
			} else if ok {
				_ = json.Unmarshal(cp, &from)
			}
		}
		for f := from + 1; f <= frames; f++ {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(frameTime):
			}
			if isTask {
				// Fenced: a replica that lost the task cannot write.
				if err := ex.Checkpoint(ctx, f); err != nil {
					return nil, err
				}
				_ = ex.SetMessage(ctx, fmt.Sprintf("frame %d of %d drawn by %s (attempt %d)", f, frames, replica, ex.Attempt))
			}
		}
		attempt := int64(1)
		if isTask {
			attempt = ex.Attempt
		}
		return mcp.NewToolResultText(fmt.Sprintf("rendered %d frames: %s finished them on attempt %d, from frame %d",
			frames, replica, attempt, from+1)), nil
	}
}
