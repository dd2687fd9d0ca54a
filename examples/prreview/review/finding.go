// Package review holds what the PR-review demo's agents know about pull
// requests: unified diffs, the bundled pull requests, fetching a live one
// from GitHub, and three deterministic reviewers (security, performance and
// style) that look at the added lines of a diff. The reviewers are rules
// (regular expressions and a loop-nesting walk), not a model: a finding is a
// place a person should look, stated with the rule that produced it.
package review

import (
	"fmt"
	"slices"
	"strings"
)

// The reviewer kinds.
const (
	Security    = "security"
	Performance = "performance"
	Style       = "style"
)

// Kinds lists the reviewer kinds in the order the dashboard shows them.
var Kinds = []string{Security, Performance, Style}

// Severities, most severe first.
var Severities = []string{"high", "medium", "low", "info"}

// A Finding is one thing a reviewer flags on one line.
type Finding struct {
	Kind     string `json:"kind"`
	Rule     string `json:"rule"`
	Severity string `json:"severity"`
	File     string `json:"file"`
	Line     int    `json:"line"`
	Message  string `json:"message"`
	Snippet  string `json:"snippet"`
	// By and Attempt credit the finding to the agent, and its attempt at
	// the run, that found it (set by the reviewer agent, not by the rules;
	// a successor resuming a run keeps its predecessor's credit).
	By      string `json:"by,omitempty"`
	Attempt int64  `json:"attempt,omitempty"`
}

// String is the finding as one line: "file:line [severity] rule: message".
func (f Finding) String() string {
	return fmt.Sprintf("%s:%d [%s] %s: %s", f.File, f.Line, f.Severity, f.Rule, f.Message)
}

// snippet trims a line for display.
func snippet(s string) string {
	s = strings.TrimSpace(s)
	if r := []rune(s); len(r) > 120 {
		return string(r[:117]) + "..."
	}
	return s
}

// SortFindings orders findings by severity, then file and line.
func SortFindings(fs []Finding) {
	rank := func(s string) int {
		if i := slices.Index(Severities, s); i >= 0 {
			return i
		}
		return len(Severities)
	}
	slices.SortStableFunc(fs, func(a, b Finding) int {
		if d := rank(a.Severity) - rank(b.Severity); d != 0 {
			return d
		}
		if c := strings.Compare(a.File, b.File); c != 0 {
			return c
		}
		return a.Line - b.Line
	})
}

// ReviewFile runs the reviewer of kind over one file and returns its
// findings in line order. An unknown kind is an error.
func ReviewFile(kind string, f File) ([]Finding, error) {
	switch kind {
	case Security:
		return securityRules.apply(f), nil
	case Style:
		return styleRules.apply(f), nil
	case Performance:
		return performance(f), nil
	}
	return nil, fmt.Errorf("unknown reviewer kind %q: valid kinds are %s", kind, strings.Join(Kinds, ", "))
}

// About says in one sentence what the reviewer of kind really does.
func About(kind string) string {
	switch kind {
	case Security:
		return securityRules.About
	case Style:
		return styleRules.About
	case Performance:
		return performanceAbout
	}
	return ""
}
