package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var word = regexp.MustCompile(`[A-Za-z]+`)

// wordingSlips lists what a proofreader would mark in text: doubled words, a question mark run
// into a semicolon, and the "(s)" plural that plural() replaces.
func wordingSlips(text string) []string {
	var slips []string
	for _, line := range strings.Split(text, "\n") {
		// A word written twice in a row, one space apart ("version version"): the slip of a
		// sentence put together from parts. A table's columns are further apart, and UPPER
		// placeholders (--scope SCOPE) name the flag they follow.
		at := word.FindAllStringIndex(line, -1)
		for i := 1; i < len(at); i++ {
			prev, w := line[at[i-1][0]:at[i-1][1]], line[at[i][0]:at[i][1]]
			if len(w) > 1 && line[at[i-1][1]:at[i][0]] == " " && strings.EqualFold(w, prev) && w != strings.ToUpper(w) {
				slips = append(slips, "doubled "+strings.ToLower(w)+": "+line)
			}
		}
		for _, bad := range []string{"?;", "(s)", " ,", " ;"} {
			if strings.Contains(line, bad) {
				slips = append(slips, bad+": "+line)
			}
		}
	}
	return slips
}

func TestWordingSlips(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"pinned version version 1.0", "compiled compiled module", "found it?; retry", "2 place(s)"} {
		if len(wordingSlips(s)) == 0 {
			t.Errorf("wordingSlips(%q) found nothing", s)
		}
	}
	for _, s := range []string{"mur push FILE --scope SCOPE", "that is, that one", "a .mur.zip", "e.g. 'a b'"} {
		if got := wordingSlips(s); len(got) != 0 {
			t.Errorf("wordingSlips(%q) = %q", s, got)
		}
	}
}

// TestHelpHasNoSlips proofreads every command's --help and mur help.
func TestHelpHasNoSlips(t *testing.T) {
	t.Parallel()
	var walk func(path []string, cs []*command)
	walk = func(path []string, cs []*command) {
		for _, c := range cs {
			p := append(append([]string{}, path...), c.name)
			_, out, errOut := runMur(t, append(p, "--help")...)
			for _, s := range wordingSlips(out + errOut) {
				t.Errorf("mur %s --help: %s", strings.Join(p, " "), s)
			}
			walk(p, c.subs)
		}
	}
	walk(nil, commands())
	_, out, _ := runMur(t, "help")
	for _, s := range wordingSlips(out) {
		t.Errorf("mur help: %s", s)
	}
}

// TestErrorsHaveNoSlips proofreads what common mistakes print.
func TestErrorsHaveNoSlips(t *testing.T) {
	home := t.TempDir()
	t.Chdir(t.TempDir())
	for _, args := range [][]string{
		{"pull", "acme/x@"},
		{"pull", "acme/x@1.0@2"},
		{"pull", "Acme/x@1.0"},
		{"pull", "acme/x:1.0"},
		{"pull", "acme/x@sha256:abc"},
		{"pull", "--platform", "bogus"},
		{"pull", "--provenance", "bogus"},
		{"run", "acme/x@1.0"},
		{"run"},
		{"push", "x.mur.zip"},
		{"push", "x.mur.zip", "--store", "oci://h"},
		{"push", "acme/x@1.0", "--scope", "acme", "--store", "oci-layout:s"},
		{"cache", "records", "--since", "soon"},
		{"cache", "records", "--digest", "sha256:zz"},
		{"info", "acme/none"},
		{"state", "rm", "none"},
		{"lock", "forget-scope"},
		{"verify", "--platform", "bogus"},
		{"pul"},
	} {
		_, out, errOut := runMur(t, append([]string{"--home", home, "--offline"}, args...)...)
		for _, s := range wordingSlips(out + errOut) {
			t.Errorf("mur %s: %s", strings.Join(args, " "), s)
		}
	}
}

// TestGoldenOutputsHaveNoSlips proofreads every message and warning the --json goldens hold:
// what the commands of the golden walk print.
func TestGoldenOutputsHaveNoSlips(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("testdata", "golden", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no goldens: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range wordingSlips(string(b)) {
			t.Errorf("%s: %s", f, s)
		}
	}
}
