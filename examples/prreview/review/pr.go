package review

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
)

//go:embed fixtures/*.json fixtures/*.diff
var fixturesFS embed.FS

// A PR is a pull request as the demo reviews it: metadata and its unified
// diff.
type PR struct {
	// ID names a bundled pull request ("bundled:<id>" in the URL field);
	// empty for one fetched from GitHub.
	ID     string `json:"id,omitempty"`
	Title  string `json:"title"`
	Author string `json:"author"`
	Branch string `json:"branch"`
	Base   string `json:"base"`
	Repo   string `json:"repo"`
	Number int    `json:"number"`
	Body   string `json:"body,omitempty"`
	// URL is the pull request's page on GitHub, for a live one.
	URL string `json:"url,omitempty"`
	// Source is "bundled" or "github".
	Source string `json:"source"`
	Diff   string `json:"diff,omitempty"`
}

// Ref is the PR as "owner/repo#number".
func (p PR) Ref() string { return fmt.Sprintf("%s#%d", p.Repo, p.Number) }

// Files parses the PR's diff.
func (p PR) Files() ([]File, error) { return ParseDiff(p.Diff) }

// MaxDiffBytes bounds a diff the demo accepts: it is stored in the
// sidecar's KV store, whose values are limited to 1 MiB of JSON.
const MaxDiffBytes = 512 << 10

// ErrUnknownBundled is returned by Bundled for an id that is not bundled.
var ErrUnknownBundled = errors.New("no bundled pull request has that id")

// BundledPRs returns the pull requests shipped with the demo, without their
// diffs, in a fixed order (the talk's one first).
func BundledPRs() []PR {
	entries, _ := fixturesFS.ReadDir("fixtures")
	var out []PR
	for _, e := range entries {
		if path.Ext(e.Name()) != ".json" {
			continue
		}
		p, err := Bundled(strings.TrimSuffix(e.Name(), ".json"))
		if err != nil {
			panic(err) // the fixtures are part of the binary; a test reads every one
		}
		p.Diff = ""
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b PR) int {
		if a.ID == TalkPR {
			return -1
		}
		if b.ID == TalkPR {
			return 1
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// TalkPR is the id of the bundled pull request shaped like the one in the
// talk that introduced the sidecar.
const TalkPR = "mcp-call-tool-result"

// Bundled returns one bundled pull request with its diff.
func Bundled(id string) (PR, error) {
	if id == "" || strings.ContainsAny(id, "/\\.") {
		return PR{}, fmt.Errorf("%w: %q", ErrUnknownBundled, id)
	}
	meta, err := fixturesFS.ReadFile("fixtures/" + id + ".json")
	if err != nil {
		return PR{}, fmt.Errorf("%w: %q", ErrUnknownBundled, id)
	}
	var p PR
	if err := json.Unmarshal(meta, &p); err != nil {
		return PR{}, fmt.Errorf("fixture %s: %w", id, err)
	}
	diff, err := fixturesFS.ReadFile("fixtures/" + id + ".diff")
	if err != nil {
		return PR{}, fmt.Errorf("fixture %s: %w", id, err)
	}
	p.Diff, p.Source = string(diff), "bundled"
	if _, err := p.Files(); err != nil {
		return PR{}, fmt.Errorf("fixture %s: %w", id, err)
	}
	return p, nil
}
