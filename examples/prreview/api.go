package main

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"time"

	"github.com/statesidecar/state/examples/prreview/review"
)

//go:embed web
var webFS embed.FS

// routes is the dashboard's HTTP API: the page, its event stream, and one
// POST per button.
func (d *demo) routes() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(webFS, "web")
	mux.Handle("GET /", http.FileServerFS(static))
	mux.HandleFunc("GET /api/events", d.events)
	mux.HandleFunc("GET /api/state", func(w http.ResponseWriter, r *http.Request) {
		s := d.snapshot()
		s.Now = epoch(time.Now())
		writeJSON(w, http.StatusOK, s)
	})
	mux.HandleFunc("GET /api/prs", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"prs": review.BundledPRs()})
	})
	mux.HandleFunc("POST /api/pr", d.action(func(ctx context.Context, in actionInput) (any, error) {
		pr, err := d.loadPR(ctx, in.Input)
		if err != nil {
			return nil, err
		}
		return map[string]any{"message": fmt.Sprintf("Loaded %q by @%s", pr.Title, pr.Author)}, nil
	}))
	mux.HandleFunc("POST /api/register", d.action(func(ctx context.Context, in actionInput) (any, error) {
		p, err := d.register(ctx)
		if err != nil {
			return nil, err
		}
		return map[string]any{"message": "Registered " + p.Parent, "run_id": p.Parent}, nil
	}))
	mux.HandleFunc("POST /api/reset", d.action(func(ctx context.Context, in actionInput) (any, error) {
		return map[string]any{"message": "Demo reset"}, d.reset(ctx, false)
	}))
	mux.HandleFunc("POST /api/change-pr", d.action(func(ctx context.Context, in actionInput) (any, error) {
		return map[string]any{"message": "Pick another pull request"}, d.reset(ctx, true)
	}))
	mux.HandleFunc("POST /api/spawn", d.action(func(ctx context.Context, in actionInput) (any, error) {
		ids, err := d.spawn(ctx, in.Kind, in.Lang, max(in.Count, 1))
		if err != nil {
			return nil, err
		}
		return map[string]any{"message": fmt.Sprintf("Spawned %v", ids), "agents": ids}, nil
	}))
	mux.HandleFunc("POST /api/crash", d.action(func(ctx context.Context, in actionInput) (any, error) {
		id, err := d.crash(ctx, in.Kind)
		if err != nil {
			return nil, err
		}
		return map[string]any{"message": "Killed " + id + " with SIGKILL", "agent": id}, nil
	}))
	mux.HandleFunc("POST /api/freeze", d.action(func(ctx context.Context, in actionInput) (any, error) {
		id, err := d.freeze(ctx, in.Kind, false)
		if err != nil {
			return nil, err
		}
		return map[string]any{"message": "Froze " + id + " with SIGSTOP", "agent": id}, nil
	}))
	mux.HandleFunc("POST /api/thaw", d.action(func(ctx context.Context, in actionInput) (any, error) {
		id, err := d.freeze(ctx, in.Kind, true)
		if err != nil {
			return nil, err
		}
		return map[string]any{"message": "Thawed " + id + " with SIGCONT", "agent": id}, nil
	}))
	mux.HandleFunc("POST /api/aggregate", d.action(func(ctx context.Context, in actionInput) (any, error) {
		id, err := d.aggregate(ctx)
		if err != nil {
			return nil, err
		}
		return map[string]any{"message": "Aggregator " + id + " started", "agent": id}, nil
	}))
	mux.HandleFunc("POST /api/pace", d.action(func(ctx context.Context, in actionInput) (any, error) {
		return map[string]any{"message": "Pace " + in.Pace}, d.setPace(in.Pace)
	}))
	mux.HandleFunc("POST /api/clear-logs", d.action(func(ctx context.Context, in actionInput) (any, error) {
		d.hub.clearLogs()
		return map[string]any{"message": "Logs cleared"}, nil
	}))
	return mux
}

// actionInput is the JSON body of every button's POST.
type actionInput struct {
	Input string `json:"input"`
	Kind  string `json:"kind"`
	Lang  string `json:"lang"`
	Count int    `json:"count"`
	Pace  string `json:"pace"`
}

// action wraps a button's handler: a JSON body in (which also keeps other
// web pages from posting forms to the dashboard), a JSON answer out, and
// refusals as {"error": "..."} with their status.
func (d *demo) action(fn func(context.Context, actionInput) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
			writeJSON(w, http.StatusUnsupportedMediaType, map[string]string{"error": "Send the request as application/json."})
			return
		}
		if o := r.Header.Get("Origin"); o != "" && o != "http://"+r.Host {
			writeJSON(w, http.StatusForbidden, map[string]string{"error": "Requests from other origins are refused."})
			return
		}
		var in actionInput
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&in); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "The request body is not valid JSON: " + err.Error()})
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Minute)
		defer cancel()
		out, err := fn(ctx, in)
		if err != nil {
			var ue *userError
			switch {
			case errors.As(err, &ue):
				writeJSON(w, ue.status, map[string]string{"error": ue.msg})
			case isUnreachable(err):
				writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": sidecarFailure(d.cfg.SidecarURL, err).Error()})
			default:
				d.hub.system("error", err.Error())
				writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
			}
			return
		}
		writeJSON(w, http.StatusOK, out)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// events is the page's server-sent event stream: a "state" snapshot
// whenever something changes, every "log" line as it happens (the kept
// ones first), and "cleared" when the log is cleared.
func (d *demo) events(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	ch, logs, cancel := d.hub.subscribe()
	defer cancel()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	send := func(name string, v any) bool {
		b, err := json.Marshal(v)
		if err != nil {
			return true
		}
		return writeEvent(w, fl, name, b) == nil
	}
	s := d.snapshot()
	s.Now = epoch(time.Now())
	if !send("state", s) || !send("logs", logs) {
		return
	}
	ping := time.NewTicker(15 * time.Second)
	defer ping.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-ping.C:
			if _, err := fmt.Fprint(w, ": ping\n\n"); err != nil {
				return
			}
			fl.Flush()
		case ev, ok := <-ch:
			if !ok {
				return // too slow: the browser reconnects
			}
			if writeEvent(w, fl, ev.name, ev.data) != nil {
				return
			}
		}
	}
}

func writeEvent(w http.ResponseWriter, fl http.Flusher, name string, data []byte) error {
	if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data); err != nil {
		return err
	}
	fl.Flush()
	return nil
}
