package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// -q silences progress and never a warning (docs/commands.md): what the project's config.yaml
// ignored, a mistyped key of the home's config.yaml or of murmur.yaml, and a grant's typo all
// print under -q, as they do without it.
func TestQuietKeepsWarnings(t *testing.T) {
	home, dir := t.TempDir(), t.TempDir()
	t.Chdir(dir)
	if code, _, errOut := runMur(t, "--home", home, "-q", "key", "generate", "team"); code != 0 {
		t.Fatalf("key generate: exit %d, %s", code, errOut)
	}
	write := func(path, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(home, "config.yaml"), "store: [ \"oci-layout:/nowhere\" ]\n")
	write(filepath.Join(dir, ".murmur", "config.yaml"), "provenance: off\ntrusted_keys:\n  - pem_file: "+filepath.Join(dir, "team.pub")+"\n")
	write(filepath.Join(dir, "murmur.yaml"), "name: c\ndescriptio: x\nartifacts:\n  - name: acme/hello\n    version: 1.0.0\n    capabilites: {}\n")
	want := []string{
		`unknown key "store" ignored; did you mean stores\?`,
		`trusted_keys ignored: a project can't add a key`,
		`provenance: off ignored \(the home's provenance: prefer holds\)`,
		`unknown key "descriptio" ignored`,
		`unknown key "artifacts\[0\]\.capabilites" ignored; did you mean capabilities\?`,
	}
	for _, quiet := range []bool{false, true} {
		args := []string{"--home", home, "ls"}
		if quiet {
			args = append([]string{"-q"}, args...)
		}
		code, _, errOut := runMur(t, args...)
		if code != 0 {
			t.Fatalf("mur %s: exit %d, %s", strings.Join(args, " "), code, errOut)
		}
		for _, w := range want {
			if !regexp.MustCompile(`(?m)^mur: warning: .*` + w).MatchString(errOut) {
				t.Errorf("mur %s: no warning matching %q in\n%s", strings.Join(args, " "), w, errOut)
			}
		}
	}
}

// Every warning goes through env.Warn, which -q never silences; none through Progress, which it
// does.
func TestNoWarningTakesProgress(t *testing.T) {
	bad := regexp.MustCompile(`Progress\(\s*"mur: warning|Progress\(\s*"warning`)
	eachSourceLine(t, func(file string, n int, line string) {
		if bad.MatchString(line) {
			t.Errorf("%s:%d: a warning printed through Progress, which -q silences; use e.Warn: %s", file, n, strings.TrimSpace(line))
		}
	})
}

// eachSourceLine calls fn with every line of this package's code, tests left out.
func eachSourceLine(t *testing.T, fn func(file string, n int, line string)) {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			fn(f, i+1, line)
		}
	}
}
