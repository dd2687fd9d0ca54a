package state_test

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// readmeMaxLines is the most lines README.md may have: it is what a
// newcomer reads in five minutes, and every topic beyond that lives in
// docs/, one file each.
const readmeMaxLines = 300

// TestReadmeShort fails when README.md grows past readmeMaxLines.
func TestReadmeShort(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > readmeMaxLines {
		t.Errorf("README.md has %d lines, more than %d: move the detail to a page under docs/ and link it", n, readmeMaxLines)
	}
}

// pendingDocs are pages that the README links to and that other work in
// progress adds. A missing one is tolerated (and logged) until it lands;
// once it exists its links are checked like any other page's.
var pendingDocs = map[string]bool{
	"docs/fair-share.md": true,
	"docs/security.md":   true,
	"docs/encryption.md": true,
	"docs/console.md":    true,
}

// TestDocLinks fails on a relative link in README.md, CHANGELOG.md or
// docs/*.md whose file or directory does not exist, or whose #fragment names
// no heading of the Markdown file it points to.
func TestDocLinks(t *testing.T) {
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append([]string{"README.md", "CHANGELOG.md"}, pages...)
	anchors := map[string]map[string]bool{}
	for _, page := range pages {
		links, err := markdownLinks(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range links {
			target, fragment, _ := strings.Cut(l.target, "#")
			path := page
			if target != "" {
				path = filepath.Join(filepath.Dir(page), filepath.FromSlash(target))
			}
			if _, err := os.Stat(path); err != nil {
				if pendingDocs[filepath.ToSlash(path)] {
					t.Logf("%s:%d: %s does not exist yet (pending)", page, l.line, l.target)
					continue
				}
				t.Errorf("%s:%d: link %q: %s does not exist", page, l.line, l.target, path)
				continue
			}
			if fragment == "" || !strings.HasSuffix(path, ".md") {
				continue
			}
			if anchors[path] == nil {
				a, err := headingAnchors(path)
				if err != nil {
					t.Fatal(err)
				}
				anchors[path] = a
			}
			if !anchors[path][fragment] {
				t.Errorf("%s:%d: link %q: %s has no heading #%s", page, l.line, l.target, path, fragment)
			}
		}
	}
}

// TestDocLinksFindDeadLinks checks the checker: a page with a dead file link
// and a dead fragment gets both reported.
func TestDocLinksFindDeadLinks(t *testing.T) {
	dir := t.TempDir()
	page := filepath.Join(dir, "page.md")
	text := "# Title\n\n[ok](page.md#title) [gone](missing.md) [bad](page.md#nowhere)\n" +
		"```\n[in code](not-checked.md)\n```\n[web](https://example.com/x) [`code`](page.md)\n"
	if err := os.WriteFile(page, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	links, err := markdownLinks(page)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range links {
		got = append(got, l.target)
	}
	want := []string{"page.md#title", "missing.md", "page.md#nowhere", "page.md"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("links: got %q, want %q", got, want)
	}
	a, err := headingAnchors(page)
	if err != nil {
		t.Fatal(err)
	}
	if !a["title"] || a["nowhere"] {
		t.Errorf("anchors: got %v, want title only", a)
	}
}

// mdLink is one relative link of a Markdown page.
type mdLink struct {
	line   int
	target string
}

// linkRE matches an inline link or image, [text](target); the text may hold
// code spans but no brackets.
var linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// markdownLinks returns the relative links of a Markdown file outside fenced
// code blocks: web, mail and protocol-relative links are left out.
func markdownLinks(path string) ([]mdLink, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var links []mdLink
	fenced := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") || strings.HasPrefix(target, "//") {
				continue
			}
			links = append(links, mdLink{line: n, target: target})
		}
	}
	return links, sc.Err()
}

// headingAnchors returns the fragments GitHub gives the headings of a
// Markdown file: lower case, punctuation dropped, spaces as hyphens, and a
// -1, -2... suffix for a repeated heading.
func headingAnchors(path string) (map[string]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	anchors := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case r == ' ':
				b.WriteByte('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		slug := b.String()
		if k := seen[slug]; k > 0 {
			anchors[slug+"-"+strconv.Itoa(k)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	}
	return anchors, sc.Err()
}
