package e2e

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/rogpeppe/go-internal/testscript"
)

func init() { scriptCmds["docsnippet"] = cmdDocSnippet }

// docsnippet [-sub OLD=NEW]... PAGE MARKER OUT: writes to OUT the fenced block that follows the
// line "<!-- MARKER …-->" in PAGE (a path from the repository's root, such as docs/config.md),
// with each OLD replaced by NEW. A script test runs what the docs show, not a copy of it: a
// snippet that changes in docs/ changes what the test runs, and a marker that goes away fails it.
func cmdDocSnippet(ts *testscript.TestScript, neg bool, args []string) {
	var subs [][2]string
	for len(args) >= 2 && args[0] == "-sub" {
		old, repl, ok := strings.Cut(args[1], "=")
		if !ok {
			ts.Fatalf("docsnippet: -sub takes OLD=NEW, got %q", args[1])
		}
		subs = append(subs, [2]string{old, repl})
		args = args[2:]
	}
	if neg || len(args) != 3 {
		ts.Fatalf("usage: docsnippet [-sub OLD=NEW]... PAGE MARKER OUT")
	}
	page, marker, out := args[0], args[1], args[2]
	data, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(page)))
	ts.Check(err)
	text, ok := snippetAfter(string(data), marker)
	if !ok {
		ts.Fatalf("%s has no line <!-- %s --> followed by a fenced block", page, marker)
	}
	for _, s := range subs {
		if !strings.Contains(text, s[0]) {
			ts.Fatalf("the snippet %q of %s has no %q to replace", marker, page, s[0])
		}
		text = strings.ReplaceAll(text, s[0], s[1])
	}
	path := ts.MkAbs(out)
	ts.Check(os.MkdirAll(filepath.Dir(path), 0o755))
	ts.Check(os.WriteFile(path, []byte(text), 0o644))
}

// snippetAfter is the body of the first fenced block after the marker's comment line.
func snippetAfter(page, marker string) (string, bool) {
	lines := strings.SplitAfter(page, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, "<!-- "+marker+" ") && strings.TrimSpace(l) != "<!-- "+marker+" -->" {
			continue
		}
		if i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "```") {
			return "", false
		}
		var body strings.Builder
		for _, b := range lines[i+2:] {
			if strings.HasPrefix(b, "```") {
				return body.String(), true
			}
			body.WriteString(b)
		}
		return "", false
	}
	return "", false
}
