package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"time"

	"github.com/statesidecar/state/examples/prreview/review"
)

var execLookPath = exec.LookPath

func jsonUnmarshal(raw []byte, out any, tool string) error {
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s: unexpected result: %w", tool, err)
	}
	return nil
}

// A sidecarView is what the watcher last read from the sidecar.
type sidecarView struct {
	Healthy bool
	Error   string
	Backend string
	Version string
	Runs    []runInfo
	KV      []kvEntry
	Report  json.RawMessage
}

// A kvEntry is one key of the demo in the KV store, as the page shows it.
type kvEntry struct {
	Key       string   `json:"key"`
	Version   int64    `json:"version"`
	AgentID   string   `json:"agent_id"`
	UpdatedAt *float64 `json:"updated_at"`
	ExpiresAt *float64 `json:"expires_at"`
	Bytes     int      `json:"bytes"`
	Preview   any      `json:"preview"`
}

// watch keeps the page up to date: it reads the sidecar's health, the
// pipeline's runs and its keys (on a tick, and soon after any agent
// reports), and pushes a snapshot whenever something changed.
func (d *demo) watch(ctx context.Context) {
	tick := time.NewTicker(700 * time.Millisecond)
	defer tick.Stop()
	var lastHealth, lastRead time.Time
	var last []byte
	for {
		now := time.Now()
		if now.Sub(lastHealth) > 2*time.Second {
			d.checkHealth(ctx)
			lastHealth = now
		}
		if now.Sub(lastRead) > 250*time.Millisecond {
			if p := d.pipeline(); p != nil {
				d.readPipeline(ctx, p)
			}
			lastRead = now
		}
		snap := d.snapshot()
		snap.Now = 0
		b, _ := json.Marshal(snap)
		if string(b) != string(last) {
			last = b
			snap.Now = epoch(time.Now())
			d.hub.send("state", snap)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-d.wake:
			// Agent reports come in bursts: take them in at most every 100 ms.
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// checkHealth asks the sidecar how it is.
func (d *demo) checkHealth(ctx context.Context) {
	hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var h healthResult
	err := d.c.callInto(hctx, "sidecar_health", nil, &h)
	d.vmu.Lock()
	defer d.vmu.Unlock()
	wasHealthy, wasErr := d.view.Healthy, d.view.Error
	switch {
	case err != nil:
		d.view.Healthy, d.view.Error = false, sidecarFailure(d.cfg.SidecarURL, err).Error()
	case h.Status != "ok":
		d.view.Healthy, d.view.Error = false, "The sidecar reports "+h.Status
	default:
		d.view.Healthy, d.view.Error, d.view.Backend, d.view.Version = true, "", h.Backend, h.Version
	}
	if ctx.Err() != nil {
		return
	}
	if d.view.Healthy && !wasHealthy {
		d.hub.system("info", fmt.Sprintf("Connected to the sidecar at %s (%s backend, version %s)", d.cfg.SidecarURL, h.Backend, h.Version))
	} else if !d.view.Healthy && d.view.Error != wasErr {
		d.hub.system("error", d.view.Error)
	}
}

// readPipeline reads the pipeline's runs and keys.
func (d *demo) readPipeline(ctx context.Context, p *pipeline) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var all runsResult
	if err := d.c.callInto(rctx, "workflow_discover", map[string]any{
		"tags": map[string]any{tagPipeline: pipelineName, tagDemo: d.id}, "limit": 100}, &all); err != nil {
		return
	}
	want := map[string]bool{p.Parent: true}
	for _, id := range p.Children {
		want[id] = true
	}
	var runs []runInfo
	for _, r := range all.Runs {
		if want[r.RunID] {
			runs = append(runs, r)
		}
	}
	var keys struct {
		Keys []string `json:"keys"`
	}
	if err := d.c.callInto(rctx, "state_list", map[string]any{"prefix": prefixKey(p.Parent)}, &keys); err != nil {
		return
	}
	var kv []kvEntry
	var rep json.RawMessage
	for _, k := range keys.Keys {
		var g getResult
		if err := d.c.callInto(rctx, "state_get", map[string]any{"key": k}, &g); err != nil || !g.Found {
			continue
		}
		e := kvEntry{Key: k, AgentID: deref(g.AgentID), UpdatedAt: g.UpdatedAt, ExpiresAt: g.ExpiresAt, Bytes: len(g.Value),
			Preview: abbreviate(g.Value)}
		if g.Version != nil {
			e.Version = *g.Version
		}
		if k == prKey(p.Parent) {
			var pr review.PR
			if json.Unmarshal(g.Value, &pr) == nil {
				e.Preview = map[string]any{"title": pr.Title, "ref": pr.Ref(), "diff": fmt.Sprintf("(%d bytes of unified diff)", len(pr.Diff))}
			}
		}
		if k == reportKey(p.Parent) {
			rep = g.Value
			e.Preview = "(the combined report, shown below)"
		}
		kv = append(kv, e)
	}
	d.vmu.Lock()
	defer d.vmu.Unlock()
	if d.pipe != p {
		return // reset meanwhile
	}
	d.view.Runs, d.view.KV, d.view.Report = runs, kv, rep
}

// A snapshot is everything the page shows, pushed as the "state" event.
type snapshot struct {
	Now      float64           `json:"now"`
	Demo     string            `json:"demo"`
	Sidecar  sidecarInfo       `json:"sidecar"`
	PR       *prView           `json:"pr"`
	Pipeline *pipeline         `json:"pipeline"`
	Runs     []runInfo         `json:"runs"`
	KV       []kvEntry         `json:"kv"`
	Report   json.RawMessage   `json:"report"`
	Workers  []worker          `json:"workers"`
	Races    []raceView        `json:"races"`
	Pace     string            `json:"pace"`
	Paces    map[string]string `json:"paces"`
	ClaimTTL float64           `json:"claim_ttl"`
	Node     nodeAgent         `json:"node"`
	About    map[string]string `json:"about"`
}

type sidecarInfo struct {
	URL     string `json:"url"`
	Own     bool   `json:"own"`
	DBPath  string `json:"db_path,omitempty"`
	Healthy bool   `json:"healthy"`
	Error   string `json:"error,omitempty"`
	Backend string `json:"backend,omitempty"`
	Version string `json:"version,omitempty"`
}

type prView struct {
	review.PR
	Files []fileView `json:"files"`
}

type fileView struct {
	Path    string `json:"path"`
	Added   int    `json:"added"`
	Removed int    `json:"removed"`
}

// A raceView is a race as the kind's panel shows it.
type raceView struct {
	ID       string       `json:"id"`
	Kind     string       `json:"kind"`
	Released bool         `json:"released"`
	Winner   string       `json:"winner,omitempty"`
	Members  []raceMember `json:"members"`
}

type raceMember struct {
	ID      string `json:"id"`
	Outcome string `json:"outcome"` // won, lost, waiting, or the agent's state
	Reason  string `json:"reason,omitempty"`
}

func (d *demo) snapshot() snapshot {
	ws, rs := d.sup.snapshot()
	d.vmu.Lock()
	defer d.vmu.Unlock()
	s := snapshot{Demo: d.id, Pace: d.pace, Paces: map[string]string{}, ClaimTTL: d.cfg.ClaimTTL.Seconds(), Node: d.node,
		Sidecar: sidecarInfo{URL: d.cfg.SidecarURL, Own: d.cfg.OwnDB != "", DBPath: d.cfg.OwnDB, Healthy: d.view.Healthy,
			Error: d.view.Error, Backend: d.view.Backend, Version: d.view.Version},
		Pipeline: d.pipe, Runs: d.view.Runs, KV: d.view.KV, Report: d.view.Report, Workers: ws,
		About: map[string]string{}}
	for k, v := range paces {
		s.Paces[k] = v.String()
	}
	for _, k := range review.Kinds {
		s.About[k] = review.About(k)
	}
	if d.pr != nil {
		pv := &prView{PR: *d.pr}
		pv.Diff = ""
		files, _ := d.pr.Files()
		for _, f := range files {
			a, r := f.Stats()
			pv.Files = append(pv.Files, fileView{f.Path, a, r})
		}
		s.PR = pv
	}
	byID := map[string]worker{}
	for _, w := range ws {
		byID[w.ID] = w
	}
	for _, r := range rs {
		v := raceView{ID: r.ID, Kind: r.Kind, Released: r.Released}
		for _, id := range r.Members {
			w := byID[id]
			m := raceMember{ID: id, Outcome: w.State}
			switch {
			case w.Fence > 0:
				m.Outcome, v.Winner = "won", id
			case w.State == "lost race":
				m.Outcome, m.Reason = "lost", w.Detail
			case w.State == "at barrier" || w.State == "starting" || w.State == "discovering":
				m.Outcome = "waiting"
			case w.State == "idle" || w.State == "failed":
				m.Reason = w.Detail
			}
			v.Members = append(v.Members, m)
		}
		s.Races = append(s.Races, v)
	}
	return s
}

// isUnreachable reports whether err means the sidecar is down.
func isUnreachable(err error) bool {
	return errors.Is(err, errUnreachable) || errors.Is(err, errTokenRefused)
}
