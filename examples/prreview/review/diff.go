package review

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// A File is one file of a unified diff: its new path and its hunks.
type File struct {
	// Path is the file's path after the change ("b/" stripped); for a
	// deleted file, its old path.
	Path string `json:"path"`
	// Deleted is set for a file the change removes.
	Deleted bool `json:"deleted,omitempty"`
	// Hunks are the changed regions, in order.
	Hunks []Hunk `json:"hunks"`
}

// A Hunk is one "@@" region: its lines with their line numbers in the new
// file (0 for removed lines).
type Hunk struct {
	Lines []Line `json:"lines"`
}

// A Line is one line of a hunk.
type Line struct {
	// Kind is '+' (added), '-' (removed) or ' ' (context).
	Kind byte `json:"kind"`
	// N is the line's number in the new file; 0 for a removed line.
	N    int    `json:"n"`
	Text string `json:"text"`
}

// Added returns the file's added lines, in order.
func (f File) Added() []Line {
	var out []Line
	for _, h := range f.Hunks {
		for _, l := range h.Lines {
			if l.Kind == '+' {
				out = append(out, l)
			}
		}
	}
	return out
}

// Stats counts the added and removed lines of the file.
func (f File) Stats() (added, removed int) {
	for _, h := range f.Hunks {
		for _, l := range h.Lines {
			switch l.Kind {
			case '+':
				added++
			case '-':
				removed++
			}
		}
	}
	return added, removed
}

// ErrNotADiff is returned by ParseDiff for text with no file in it.
var ErrNotADiff = errors.New("not a unified diff")

// ParseDiff reads a unified diff as git and GitHub write it ("diff --git",
// "---"/"+++" headers, "@@ -a,b +c,d @@" hunks). Binary files and files
// with no hunk (renames, mode changes) are kept with no hunks.
func ParseDiff(text string) ([]File, error) {
	var (
		files []File
		cur   *File
		hunk  *Hunk
		newN  int
	)
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	for i, raw := range lines {
		switch {
		case strings.HasPrefix(raw, "diff --git "):
			files = append(files, File{Path: gitPath(raw)})
			cur, hunk = &files[len(files)-1], nil
		case cur == nil && strings.HasPrefix(raw, "--- "):
			// A diff without "diff --git" lines (diff -u): the "---" starts a file.
			files = append(files, File{})
			cur, hunk = &files[len(files)-1], nil
			cur.Path = headerPath(raw[4:])
		case hunk == nil && strings.HasPrefix(raw, "--- "):
			if p := headerPath(raw[4:]); p != "" && cur.Path == "" {
				cur.Path = p
			}
		case hunk == nil && strings.HasPrefix(raw, "+++ "):
			if p := headerPath(raw[4:]); p == "" {
				cur.Deleted = true
			} else {
				cur.Path = p
			}
		case strings.HasPrefix(raw, "@@"):
			if cur == nil {
				return nil, fmt.Errorf("line %d: a hunk before any file header", i+1)
			}
			n, err := hunkStart(raw)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", i+1, err)
			}
			cur.Hunks = append(cur.Hunks, Hunk{})
			hunk, newN = &cur.Hunks[len(cur.Hunks)-1], n
		case hunk != nil && raw != "" && (raw[0] == '+' || raw[0] == ' '):
			hunk.Lines = append(hunk.Lines, Line{Kind: raw[0], N: newN, Text: raw[1:]})
			newN++
		case hunk != nil && raw != "" && raw[0] == '-':
			hunk.Lines = append(hunk.Lines, Line{Kind: '-', Text: raw[1:]})
		case hunk != nil && raw == "" && i < len(lines)-1:
			// Some tools drop the space of an empty context line.
			hunk.Lines = append(hunk.Lines, Line{Kind: ' ', N: newN})
			newN++
		}
	}
	if len(files) == 0 {
		return nil, ErrNotADiff
	}
	for i := range files {
		if files[i].Path == "" {
			return nil, fmt.Errorf("file %d of the diff has no path", i+1)
		}
	}
	return files, nil
}

// gitPath is the new path of a "diff --git a/x b/x" line.
func gitPath(line string) string {
	rest := strings.TrimPrefix(line, "diff --git ")
	if i := strings.LastIndex(rest, " b/"); i >= 0 {
		return rest[i+3:]
	}
	return ""
}

// headerPath is the path of a "---"/"+++" header, "" for /dev/null.
func headerPath(s string) string {
	s, _, _ = strings.Cut(s, "\t")
	s = strings.TrimSpace(s)
	if s == "/dev/null" {
		return ""
	}
	if strings.HasPrefix(s, "a/") || strings.HasPrefix(s, "b/") {
		return s[2:]
	}
	return s
}

// hunkStart reads the new file's first line number from "@@ -a,b +c,d @@".
func hunkStart(line string) (int, error) {
	_, rest, ok := strings.Cut(line, " +")
	if !ok {
		return 0, fmt.Errorf("malformed hunk header %q", line)
	}
	num, _, _ := strings.Cut(rest, " ")
	num, _, _ = strings.Cut(num, ",")
	n, err := strconv.Atoi(num)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("malformed hunk header %q", line)
	}
	return n, nil
}
