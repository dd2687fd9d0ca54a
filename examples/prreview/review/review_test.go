package review

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

func TestParseDiffLineNumbers(t *testing.T) {
	files, err := ParseDiff("diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -10,3 +10,4 @@ def f():\n a = 1\n-b = 2\n+b = 3\n+c = 4\n d = 5\n" +
		"diff --git a/old.txt b/old.txt\ndeleted file mode 100644\n--- a/old.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-gone\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || files[0].Path != "x.py" || files[1].Path != "old.txt" || !files[1].Deleted {
		t.Fatalf("files = %+v", files)
	}
	var got []string
	for _, l := range files[0].Hunks[0].Lines {
		got = append(got, fmt.Sprintf("%c%d:%s", l.Kind, l.N, l.Text))
	}
	want := []string{" 10:a = 1", "-0:b = 2", "+11:b = 3", "+12:c = 4", " 13:d = 5"}
	if !slices.Equal(got, want) {
		t.Errorf("lines = %q, want %q", got, want)
	}
	if a, r := files[0].Stats(); a != 2 || r != 1 {
		t.Errorf("stats = +%d -%d, want +2 -1", a, r)
	}
}

func TestParseDiffWithoutGitHeaders(t *testing.T) {
	files, err := ParseDiff("--- a/main.go\t2024-01-01\n+++ b/main.go\t2024-01-02\n@@ -1,0 +1,1 @@\n+package main\n")
	if err != nil || len(files) != 1 || files[0].Path != "main.go" || len(files[0].Added()) != 1 {
		t.Fatalf("files = %+v, err = %v", files, err)
	}
}

func TestParseDiffRejectsNonDiffs(t *testing.T) {
	for _, text := range []string{"", "hello world\n", "<html>404</html>"} {
		if _, err := ParseDiff(text); !errors.Is(err, ErrNotADiff) {
			t.Errorf("ParseDiff(%q) = %v, want ErrNotADiff", text, err)
		}
	}
	if _, err := ParseDiff("@@ -1 +1 @@\n+x\n"); err == nil || !strings.Contains(err.Error(), "before any file header") {
		t.Errorf("a hunk without a file: %v", err)
	}
	if _, err := ParseDiff("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +abc @@\n"); err == nil || !strings.Contains(err.Error(), "malformed hunk header") {
		t.Errorf("a bad hunk header: %v", err)
	}
}

// rulesOf runs every reviewer over a bundled PR and returns "kind/rule@file:line" strings.
func rulesOf(t *testing.T, id string) []string {
	t.Helper()
	p, err := Bundled(id)
	if err != nil {
		t.Fatal(err)
	}
	files, err := p.Files()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, k := range Kinds {
		for _, f := range files {
			fs, err := ReviewFile(k, f)
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range fs {
				if x.Kind != k || x.Line <= 0 || x.Message == "" || x.Snippet == "" {
					t.Errorf("malformed finding %+v", x)
				}
				out = append(out, fmt.Sprintf("%s/%s@%s:%d", k, x.Rule, x.File, x.Line))
			}
		}
	}
	return out
}

// Each bundled PR has the findings its code really warrants, at the right lines.
func TestReviewersOnBundledPRs(t *testing.T) {
	want := map[string][]string{
		"mcp-call-tool-result": {
			"security/hardcoded-credential@tests/server/test_call_tool_result.py:6",
			"performance/linear-search-in-loop@src/mcp/server/lowlevel/server.py:433",
			"performance/quadratic-loop@src/mcp/server/lowlevel/server.py:440",
			"style/debug-output@src/mcp/server/lowlevel/server.py:417",
			"style/line-too-long@src/mcp/server/lowlevel/server.py:430",
			"style/camel-case-function@src/mcp/types.py:832",
			"style/leftover-marker@src/mcp/types.py:833",
			"style/none-comparison@tests/server/test_call_tool_result.py:17",
		},
		"go-user-search": {
			"security/sql-string-building@internal/store/users.go:53",
			"security/insecure-tls@internal/audit/client.go:18",
			"security/hardcoded-credential@internal/audit/client.go:21",
			"performance/query-in-loop@internal/store/users.go:68",
			"performance/nested-loop@internal/store/users.go:72",
			"performance/regex-compile-in-loop@internal/httpapi/admin_users.go:20",
			"performance/quadratic-loop@internal/httpapi/admin_users.go:26",
			"style/line-too-long@internal/store/users.go:68",
			"style/panic-on-error@internal/store/users.go:75",
			"style/debug-output@internal/httpapi/admin_users.go:32",
		},
		"docs-claim-ttl": nil,
	}
	for id, w := range want {
		got := rulesOf(t, id)
		slices.Sort(got)
		slices.Sort(w)
		if !slices.Equal(got, w) {
			t.Errorf("%s:\n got  %q\n want %q", id, got, w)
		}
	}
	// The others: each reviewer finds something, and the rules the PR was written to show.
	for id, rules := range map[string][]string{
		"py-orders-export": {"security/sql-string-building", "security/shell-injection", "security/unsafe-deserialization",
			"performance/quadratic-loop", "performance/query-in-loop", "performance/string-concat-in-loop", "style/bare-except"},
		"ts-deploy-notify": {"security/slack-webhook", "security/html-injection", "security/shell-injection",
			"performance/quadratic-loop", "performance/request-in-loop", "style/var-declaration", "style/loose-equality"},
	} {
		got := strings.Join(rulesOf(t, id), " ")
		for _, r := range rules {
			if !strings.Contains(got, r+"@") {
				t.Errorf("%s: no %s finding in %s", id, r, got)
			}
		}
	}
}

func TestBundledPRs(t *testing.T) {
	prs := BundledPRs()
	if len(prs) < 4 || prs[0].ID != TalkPR || prs[0].Title != "fix: correct MCPServer call_tool result type" {
		t.Fatalf("bundled = %+v", prs)
	}
	for _, p := range prs {
		if p.Diff != "" || p.Title == "" || p.Author == "" || p.Branch == "" || p.Repo == "" || p.Source != "bundled" {
			t.Errorf("bundled PR %+v", p)
		}
	}
	for _, id := range []string{"", "nope", "../rules/style", "fixtures/x"} {
		if _, err := Bundled(id); !errors.Is(err, ErrUnknownBundled) {
			t.Errorf("Bundled(%q) = %v, want ErrUnknownBundled", id, err)
		}
	}
	if _, err := ReviewFile("grammar", File{}); err == nil || !strings.Contains(err.Error(), "security, performance, style") {
		t.Errorf("unknown kind: %v", err)
	}
}

func TestParsePRURL(t *testing.T) {
	ok := map[string]PRRef{
		"https://github.com/modelcontextprotocol/python-sdk/pull/1187":      {"modelcontextprotocol", "python-sdk", 1187},
		"github.com/golang/go/pull/1/files":                                 {"golang", "go", 1},
		"  http://www.github.com/a-b/c.d_e/pull/42?diff=split#discussion  ": {"a-b", "c.d_e", 42},
	}
	for raw, want := range ok {
		got, err := ParsePRURL(raw)
		if err != nil || got != want {
			t.Errorf("ParsePRURL(%q) = %+v, %v; want %+v", raw, got, err, want)
		}
	}
	bad := map[string]string{
		"":                                   "empty",
		"not a url":                          `"not a url" is neither a URL nor the id of a bundled PR`,
		"https://github.com/%zz/c/pull/1":    "does not parse as a URL",
		"https://gitlab.com/a/b/pull/1":      `host is "gitlab.com"`,
		"ftp://github.com/a/b/pull/1":        `scheme is "ftp"`,
		"https://github.com/a/b/issues/1":    "not /OWNER/REPO/pull/NUMBER",
		"https://github.com/a/b/pull/0":      "not a positive number",
		"https://github.com/a/b/pull/x1":     "not a positive number",
		"https://github.com/-a/b/pull/1":     "not a valid OWNER/REPO",
		"https://github.com/a/b%20c/pull/12": "not a valid OWNER/REPO",
	}
	for raw, why := range bad {
		_, err := ParsePRURL(raw)
		if !errors.Is(err, ErrBadPRURL) || !strings.Contains(err.Error(), why) {
			t.Errorf("ParsePRURL(%q) = %v, want ErrBadPRURL saying %q", raw, err, why)
		}
	}
}

// A fake GitHub API: the metadata, the diff, 404 and a rate limit.
func TestGitHubFetch(t *testing.T) {
	talk, _ := Bundled(TalkPR)
	var auth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = append(auth, r.Header.Get("Authorization"))
		switch r.URL.Path {
		case "/repos/acme/tools/pulls/7":
			if r.Header.Get("Accept") == "application/vnd.github.diff" {
				fmt.Fprint(w, talk.Diff)
				return
			}
			fmt.Fprint(w, `{"title":"fix: correct MCPServer call_tool result type","html_url":"https://github.com/acme/tools/pull/7",
				"user":{"login":"fengjikui"},"head":{"ref":"fix-shapes"},"base":{"ref":"main"},"body":"b"}`)
		case "/repos/acme/tools/pulls/8":
			w.WriteHeader(http.StatusForbidden)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	gh := GitHub{API: srv.URL, Token: "tok"}
	ctx := context.Background()
	p, err := gh.Fetch(ctx, PRRef{"acme", "tools", 7})
	if err != nil {
		t.Fatal(err)
	}
	if p.Title != talk.Title || p.Author != "fengjikui" || p.Branch != "fix-shapes" || p.Source != "github" || p.Ref() != "acme/tools#7" || p.Diff != talk.Diff {
		t.Errorf("fetched %+v", p)
	}
	if auth[0] != "Bearer tok" {
		t.Errorf("Authorization = %q", auth[0])
	}
	if _, err := gh.Fetch(ctx, PRRef{"acme", "tools", 9}); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("missing PR: %v", err)
	}
	if _, err := gh.Fetch(ctx, PRRef{"acme", "tools", 8}); err == nil || !strings.Contains(err.Error(), "GITHUB_TOKEN") {
		t.Errorf("rate limited: %v", err)
	}
}

// Without a network the message says only bundled PRs are available.
func TestGitHubOffline(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	_, err = GitHub{API: "http://" + addr}.Fetch(context.Background(), PRRef{"a", "b", 1})
	if !errors.Is(err, ErrOffline) || !strings.Contains(err.Error(), "only the bundled pull requests are available") ||
		strings.Contains(err.Error(), addr) {
		t.Errorf("offline: %v", err)
	}
}
