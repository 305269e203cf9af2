package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// What a TAB offers, word by word: the project's artifacts and scopes, subcommands, flags and
// their fixed values; a flag's value is never the command name, and mur run's guest words are
// the guest's.
func TestCompleteWords(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "murmur.yaml"), []byte("name: p\nartifacts:\n  - { name: acme/grep, version: \"1.0.0\" }\n  - { name: beta/spin, version: \"1.0.0\" }\n"), 0o644)
	sub := filepath.Join(dir, "src", "deep")
	os.MkdirAll(sub, 0o755)
	for _, c := range []struct {
		dir   string
		words []string
		want  string
	}{
		{dir, []string{"run", ""}, "acme/ acme/grep beta/ beta/spin"},
		{sub, []string{"pull", "b"}, "beta/ beta/spin"}, // from below the project
		{t.TempDir(), []string{"run", ""}, ""},          // outside any project
		{dir, []string{"--home", "/h", "run", "a"}, "acme/ acme/grep"},
		{dir, []string{"--home", "/h", "ve"}, "verify version"},
		{dir, []string{"-q", "--json", "run", "--workdir", "w", "--timeout", "5s", "b"}, "beta/ beta/spin"},
		{dir, []string{"run", "--workdir", ""}, ""}, // a folder: the shell's own completion
		{dir, []string{"run", "acme/grep", ""}, ""},
		{dir, []string{"run", "--", ""}, ""},
		{dir, []string{"pull", "--platform", "linux"}, "linux-aarch64 linux-x86_64"},
		{dir, []string{"push", "--platform", "a"}, "any"}, // no all: a payload has one platform
		{dir, []string{"pull", "--platform=d"}, "--platform=darwin-aarch64 --platform=darwin-x86_64"},
		{dir, []string{"pull", "--platform", "=", "li"}, "linux-aarch64 linux-x86_64"}, // bash splits at '='
		{dir, []string{"push", "--platform", "="}, "any darwin-aarch64 darwin-x86_64 linux-aarch64 linux-x86_64"},
		{dir, []string{"rm", ""}, "acme/ acme/grep beta/ beta/spin"},
		{dir, []string{"in"}, "index info init"},
		{dir, []string{"init", "--st"}, "--store"},
		{dir, []string{"init", "--store", "oci"}, "oci-layout: oci://"},
		{dir, []string{"add", "--platform", "al"}, "all"},
		{dir, []string{"verify", ""}, ""}, // takes no arguments
		{dir, []string{"warm", "a"}, ""},
		{dir, []string{"pull", "--provenance", ""}, "off prefer require"},
		{dir, []string{"pull", "--from", ""}, "sources stores"},
		{dir, []string{"pull", "--pla"}, "--plain-http --platform"},
		{dir, []string{"lock", "f"}, "forget-scope"},
		{dir, []string{"cache", "g"}, "gc"},
		{dir, []string{"completion", ""}, "bash fish zsh"},
		{dir, []string{"help", "ex"}, "exit-codes"},
		{dir, []string{"help", "lo"}, "lock"},
		{dir, []string{"help", "tokens", ""}, ""},
		{dir, []string{"nosuch", ""}, ""},
		{dir, []string{""}, ""}, // checked below: every command
	} {
		var out bytes.Buffer
		complete(&out, c.words, c.dir)
		got := strings.Join(strings.Fields(out.String()), " ")
		if len(c.words) == 1 && c.words[0] == "" {
			if !strings.Contains(got, "pull") || !strings.Contains(got, "run") || !strings.Contains(got, "help") {
				t.Errorf("mur <TAB> = %q", got)
			}
			continue
		}
		if got != c.want {
			t.Errorf("mur %s<TAB> = %q, want %q", strings.Join(c.words, " "), got, c.want)
		}
	}
}
