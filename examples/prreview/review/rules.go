package review

import (
	"embed"
	"encoding/json"
	"fmt"
	"regexp"
)

// RulesFS holds the rule tables as JSON; the Node reviewer reads the same
// files from disk.
//
//go:embed rules/*.json
var RulesFS embed.FS

// A ruleSet is one rule table: line patterns over the added lines.
type ruleSet struct {
	Kind  string `json:"kind"`
	About string `json:"about"`
	Rules []rule `json:"rules"`
}

// A rule flags an added line that matches Pattern (and not Unless) in a
// file whose path matches Files.
type rule struct {
	ID       string `json:"id"`
	Severity string `json:"severity"`
	Message  string `json:"message"`
	Pattern  string `json:"pattern"`
	Unless   string `json:"unless"`
	Files    string `json:"files"`
	Flags    string `json:"flags"`

	pattern, unless, files *regexp.Regexp
}

var (
	securityRules = mustLoad("rules/security.json")
	styleRules    = mustLoad("rules/style.json")
)

// mustLoad reads and compiles a rule table; the tables are part of the
// binary, so a bad one is a programming error caught by every test.
func mustLoad(name string) *ruleSet {
	rs, err := loadRules(name)
	if err != nil {
		panic(err)
	}
	return rs
}

func loadRules(name string) (*ruleSet, error) {
	b, err := RulesFS.ReadFile(name)
	if err != nil {
		return nil, err
	}
	var rs ruleSet
	if err := json.Unmarshal(b, &rs); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	for i := range rs.Rules {
		r := &rs.Rules[i]
		prefix := ""
		if r.Flags == "i" {
			prefix = "(?i)"
		}
		if r.pattern, err = regexp.Compile(prefix + r.Pattern); err != nil {
			return nil, fmt.Errorf("%s: rule %s: %w", name, r.ID, err)
		}
		if r.Unless != "" {
			if r.unless, err = regexp.Compile("(?i)" + r.Unless); err != nil {
				return nil, fmt.Errorf("%s: rule %s: unless: %w", name, r.ID, err)
			}
		}
		if r.Files != "" {
			if r.files, err = regexp.Compile(r.Files); err != nil {
				return nil, fmt.Errorf("%s: rule %s: files: %w", name, r.ID, err)
			}
		}
	}
	return &rs, nil
}

// apply runs every rule over the file's added lines, one finding per rule
// and line, in line order.
func (rs *ruleSet) apply(f File) []Finding {
	var out []Finding
	for _, l := range f.Added() {
		for _, r := range rs.Rules {
			if r.files != nil && !r.files.MatchString(f.Path) {
				continue
			}
			if !r.pattern.MatchString(l.Text) || (r.unless != nil && r.unless.MatchString(l.Text)) {
				continue
			}
			out = append(out, Finding{Kind: rs.Kind, Rule: r.ID, Severity: r.Severity, File: f.Path,
				Line: l.N, Message: r.Message, Snippet: snippet(l.Text)})
		}
	}
	return out
}
