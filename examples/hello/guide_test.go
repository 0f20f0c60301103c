package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGuideDiff keeps docs/guide.md's ≤ 15-line promise true: §1's plain
// go-sdk program is examples/hello/plain (comment lines aside), which
// compiles; §2's diff applied to it gives this program (comment lines
// aside); and the diff changes at most 15 lines.
func TestGuideDiff(t *testing.T) {
	guide := readFile(t, filepath.Join("..", "..", "docs", "guide.md"))
	before, err := fenced(guide, "## 1. ", "go")
	if err != nil {
		t.Fatal(err)
	}
	diff, err := fenced(guide, "## 2. ", "diff")
	if err != nil {
		t.Fatal(err)
	}
	if plain := withoutComments(readFile(t, filepath.Join("plain", "main.go"))); before != plain {
		t.Errorf("docs/guide.md §1 is not examples/hello/plain/main.go (comment lines aside):\n--- guide\n%s\n--- plain/main.go\n%s", before, plain)
	}
	build := exec.Command("go", "build", "-o", os.DevNull, "./plain")
	if out, err := build.CombinedOutput(); err != nil {
		t.Errorf("the guide's plain program does not compile: %v\n%s", err, out)
	}
	after, changed, err := applyDiff(before, diff)
	if err != nil {
		t.Fatalf("docs/guide.md §2's diff does not apply to §1's program: %v", err)
	}
	if want := withoutComments(readFile(t, "main.go")); after != want {
		t.Errorf("§1's program with §2's diff is not examples/hello/main.go (comment lines aside):\n--- patched\n%s\n--- main.go\n%s", after, want)
	}
	if changed > 15 {
		t.Errorf("the guide's diff changes %d lines, more than the 15 it promises", changed)
	}
	t.Logf("the guide's diff changes %d lines (+/- lines)", changed)
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fenced returns the first fenced block of language lang after the line
// starting with heading in a Markdown text.
func fenced(md, heading, lang string) (string, error) {
	i := strings.Index(md, "\n"+heading)
	if i < 0 {
		return "", fmt.Errorf("no heading %q", heading)
	}
	rest := md[i:]
	open := "\n```" + lang + "\n"
	j := strings.Index(rest, open)
	if j < 0 {
		return "", fmt.Errorf("no ```%s block after %q", lang, heading)
	}
	body := rest[j+len(open):]
	k := strings.Index(body, "\n```\n")
	if k < 0 {
		return "", fmt.Errorf("the ```%s block after %q is not closed", lang, heading)
	}
	return body[:k+1], nil
}

// withoutComments drops the lines of Go source that are only a comment.
func withoutComments(src string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(src, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "//") {
			b.WriteString(line)
		}
	}
	return b.String()
}

// applyDiff applies a unified diff without line numbers (hunks separated
// by "@@" lines; ' ' context, '-' removed, '+' added) to src: each hunk's
// old lines must appear in src, in order, after the previous hunk's. It
// returns the result and the number of removed plus added lines.
func applyDiff(src, diff string) (string, int, error) {
	lines := strings.Split(strings.TrimSuffix(src, "\n"), "\n")
	var hunks [][]string
	for _, l := range strings.Split(strings.TrimSuffix(diff, "\n"), "\n") {
		if strings.HasPrefix(l, "@@") || len(hunks) == 0 {
			hunks = append(hunks, nil)
			if strings.HasPrefix(l, "@@") {
				continue
			}
		}
		hunks[len(hunks)-1] = append(hunks[len(hunks)-1], l)
	}
	var out []string
	pos, changed := 0, 0
	for n, h := range hunks {
		var old, repl []string
		for _, l := range h {
			if l == "" {
				return "", 0, fmt.Errorf("hunk %d: an empty line (a blank context line is a single space)", n+1)
			}
			switch l[0] {
			case ' ':
				old, repl = append(old, l[1:]), append(repl, l[1:])
			case '-':
				old, changed = append(old, l[1:]), changed+1
			case '+':
				repl, changed = append(repl, l[1:]), changed+1
			default:
				return "", 0, fmt.Errorf("hunk %d: line %q is no context, removal or addition", n+1, l)
			}
		}
		at := indexLines(lines[pos:], old)
		if at < 0 {
			return "", 0, fmt.Errorf("hunk %d: its old lines are not in the program:\n%s", n+1, strings.Join(old, "\n"))
		}
		out = append(append(out, lines[pos:pos+at]...), repl...)
		pos += at + len(old)
	}
	if len(hunks) == 0 {
		return "", 0, errors.New("an empty diff")
	}
	out = append(out, lines[pos:]...)
	return strings.Join(out, "\n") + "\n", changed, nil
}

// indexLines returns the index of the first run of want in lines, or -1.
func indexLines(lines, want []string) int {
	for i := 0; i+len(want) <= len(lines); i++ {
		match := true
		for j := range want {
			if lines[i+j] != want[j] {
				match = false
				break
			}
		}
		if match {
			return i
		}
	}
	return -1
}

func TestApplyDiff(t *testing.T) {
	src := "a\nb\nc\nd\ne\n"
	for _, c := range []struct {
		name, diff, want string
		changed          int
		err              bool
	}{
		{"one hunk", " a\n-b\n+B\n c\n", "a\nB\nc\nd\ne\n", 2, false},
		{"two hunks in order", " a\n-b\n@@\n d\n+D\n", "a\nc\nd\nD\ne\n", 2, false},
		{"hunks out of order", " d\n-e\n@@\n-a\n", "", 0, true},
		{"old lines not in the source", " a\n-c\n", "", 0, true},
		{"a bare empty line", " a\n\n-b\n", "", 0, true},
		{"a line of another kind", "*a\n", "", 0, true},
		{"empty", "", "", 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, changed, err := applyDiff(src, c.diff)
			if (err != nil) != c.err || got != c.want || changed != c.changed {
				t.Errorf("applyDiff(%q) = %q, %d, %v; want %q, %d, error %v", c.diff, got, changed, err, c.want, c.changed, c.err)
			}
		})
	}
}
