package main

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/fetch/github"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
)

func readIndex(t *testing.T, path string) *github.Index {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ix, err := github.ParseIndex(b)
	if err != nil {
		t.Fatalf("ParseIndex(%s): %v\n%s", path, err, b)
	}
	return ix
}

func TestIndexWritesIndex(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	grepFile := artifacttest.File(t, dir, "grep", "1.2.0", artifacttest.Tagged("g"))
	findFile := artifacttest.File(t, dir, "find", "0.3.0", artifacttest.Tagged("f"))
	out := filepath.Join(dir, "murmur-index.json")
	// Two runs write the same bytes only for the same time, so both give it.
	at := "2026-01-02T15:04:05Z"
	code, stdout, stderr := runMur(t, "index", grepFile, findFile, "--scope", "acme", "--release", "v1.2.0", "-o", out, "--published", at)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, out) || !strings.Contains(stdout, "2 entries") {
		t.Errorf("stdout %q does not say what was written", stdout)
	}
	ix := readIndex(t, out)
	if ix.Scope != "acme" || len(ix.Artifacts) != 2 {
		t.Fatalf("index %+v", ix)
	}
	// Marshal sorts by name: find before grep.
	for i, file := range []string{findFile, grepFile} {
		b, _ := os.ReadFile(file)
		sum := sha256.Sum256(b)
		e := ix.Artifacts[i]
		base := filepath.Base(file)
		name := "acme/" + strings.SplitN(base, "-", 2)[0]
		if e.Name != name || e.Platform != "any" || e.Release != "v1.2.0" || e.Asset != base || e.Size != int64(len(b)) || e.SHA256 != hex.EncodeToString(sum[:]) || e.Published != at {
			t.Errorf("entry %d %+v does not describe %s", i, e, base)
		}
	}
	if ix.Artifacts[0].Version != "0.3.0" || ix.Artifacts[1].Version != "1.2.0" {
		t.Errorf("versions %s, %s", ix.Artifacts[0].Version, ix.Artifacts[1].Version)
	}

	// Deterministic: the other order of files writes the same bytes.
	out2 := filepath.Join(dir, "again.json")
	if code, _, stderr := runMur(t, "index", findFile, grepFile, "--scope", "acme", "--release", "v1.2.0", "-o", out2, "--published", at); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	a, _ := os.ReadFile(out)
	b, _ := os.ReadFile(out2)
	if !bytes.Equal(a, b) {
		t.Fatalf("two runs wrote different indexes:\n%s\n%s", a, b)
	}

	// --platform and --json.
	out3 := filepath.Join(dir, "linux.json")
	code, stdout, stderr = runMur(t, "index", grepFile, "--scope", "acme", "--release", "v1.2.0", "--platform", "linux-x86_64", "-o", out3, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var res struct {
		Index   string
		Entries int
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || res.Index != out3 || res.Entries != 1 {
		t.Fatalf("--json output %q: %v", stdout, err)
	}
	if ix := readIndex(t, out3); ix.Artifacts[0].Platform != "linux-x86_64" {
		t.Fatalf("platform %s", ix.Artifacts[0].Platform)
	}
}

func TestIndexDefaultOutput(t *testing.T) {
	dir := t.TempDir()
	f := artifacttest.File(t, dir, "grep", "1.2.0", artifacttest.Tagged("g"))
	cwd := t.TempDir()
	t.Chdir(cwd)
	if code, _, stderr := runMur(t, "index", f, "--scope", "acme", "--release", "v1.2.0"); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	readIndex(t, filepath.Join(cwd, "murmur-index.json"))
}

func TestIndexRefusals(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := artifacttest.File(t, dir, "grep", "1.2.0", artifacttest.Tagged("g"))
	scoped := filepath.Join(dir, "scoped.mur.zip")
	writeScopedZip(t, scoped)
	for _, c := range []struct {
		what     string
		args     []string
		code     int
		token    string
		mentions string
	}{
		{"no files", []string{"--scope", "acme", "--release", "v1"}, 2, "usage", "FILE.mur.zip"},
		{"no scope", []string{good, "--release", "v1"}, 2, "usage", "--scope"},
		{"no release", []string{good, "--scope", "acme"}, 2, "usage", "--release"},
		{"scope local", []string{good, "--scope", "local", "--release", "v1"}, 2, "usage", "local"},
		{"bad scope", []string{good, "--scope", "Acme", "--release", "v1"}, 2, "usage", "--scope"},
		{"bad platform", []string{good, "--scope", "acme", "--release", "v1", "--platform", "plan9"}, 2, "usage", "plan9"},
		{"bad published", []string{good, "--scope", "acme", "--release", "v1", "--published", "2026-01-02"}, 2, "usage", "RFC 3339"},
		{"scoped packed name", []string{scoped, "--scope", "acme", "--release", "v1"}, 1, "invalid-artifact", "other/grep"},
	} {
		t.Run(c.what, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "index.json")
			code, _, stderr := runMur(t, append(append([]string{"index"}, c.args...), "-o", out)...)
			if code != c.code || !strings.HasPrefix(stderr, "mur: "+c.token+": ") || !strings.Contains(stderr, c.mentions) {
				t.Fatalf("exit %d, stderr %q; want exit %d, token %s, mention of %q", code, stderr, c.code, c.token, c.mentions)
			}
			if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a refused index was written: %v", err)
			}
		})
	}
}

func TestIndexMerge(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	old := artifacttest.File(t, dir, "grep", "1.2.0", artifacttest.Tagged("old"))
	index := filepath.Join(dir, "murmur-index.json")
	if code, _, stderr := runMur(t, "index", old, "--scope", "acme", "--release", "v1.2.0", "-o", index); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	next := artifacttest.File(t, dir, "grep", "1.3.0", artifacttest.Tagged("new"))
	// Merging into the same file it writes, as a publisher would.
	code, stdout, stderr := runMur(t, "index", next, "--scope", "acme", "--release", "v1.3.0", "--merge", index, "-o", index)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "2 entries") {
		t.Errorf("stdout %q", stdout)
	}
	ix := readIndex(t, index)
	if len(ix.Artifacts) != 2 || ix.Artifacts[0].Version != "1.2.0" || ix.Artifacts[0].Release != "v1.2.0" || ix.Artifacts[1].Version != "1.3.0" || ix.Artifacts[1].Release != "v1.3.0" {
		t.Fatalf("merged index %+v", ix.Artifacts)
	}
	// Each entry is published when it was first indexed (now, without --published), and a
	// merge keeps the old entries' times.
	for _, e := range ix.Artifacts {
		if _, err := time.Parse(time.RFC3339, e.Published); err != nil {
			t.Fatalf("entry %s@%s: published %q: %v", e.Name, e.Version, e.Published, err)
		}
	}
	merged, _ := os.ReadFile(index)
	before := ix.Artifacts[1].Published

	// The same file again changes nothing, its published time included.
	if code, _, stderr := runMur(t, "index", next, "--scope", "acme", "--release", "v1.3.0", "--merge", index, "-o", index); code != 0 {
		t.Fatalf("re-merging the same file: exit %d: %s", code, stderr)
	}
	if code, _, stderr := runMur(t, "index", next, "--scope", "acme", "--release", "v1.3.0", "--merge", index, "-o", index, "--published", "2099-01-01T00:00:00Z"); code != 0 {
		t.Fatalf("re-merging the same file: exit %d: %s", code, stderr)
	}
	if b, _ := os.ReadFile(index); !bytes.Equal(b, merged) {
		t.Fatalf("re-merging the same file changed the index (published was %s):\n%s", before, b)
	}

	// Another hash for a listed name, version and platform is refused, and the index is kept.
	other := artifacttest.File(t, t.TempDir(), "grep", "1.3.0", artifacttest.Tagged("changed"))
	code, _, stderr = runMur(t, "index", other, "--scope", "acme", "--release", "v1.3.0", "--merge", index, "-o", index)
	// index-mismatch, as docs/tokens.md says of it: the publisher fixes the index.
	if code != 1 || !strings.HasPrefix(stderr, "mur: index-mismatch: ") || !strings.Contains(stderr, "acme/grep@1.3.0") {
		t.Fatalf("exit %d, stderr %q; want an index-mismatch naming acme/grep@1.3.0", code, stderr)
	}
	if b, _ := os.ReadFile(index); !bytes.Equal(b, merged) {
		t.Fatal("a refused merge changed the index")
	}
	// The same payload for another platform is a new entry, not a conflict.
	if code, _, stderr := runMur(t, "index", other, "--scope", "acme", "--release", "v1.3.0", "--platform", "linux-x86_64", "--merge", index, "-o", index); code != 0 {
		t.Fatalf("another platform: exit %d: %s", code, stderr)
	}
	if ix := readIndex(t, index); len(ix.Artifacts) != 3 {
		t.Fatalf("entries %+v", ix.Artifacts)
	}

	for _, c := range []struct {
		what, merge, token string
	}{
		{"missing", filepath.Join(dir, "gone.json"), "not-found"},
		{"not an index", writeTemp(t, "garbage.json", "{"), "index-mismatch"},
		{"another scope", writeTemp(t, "other.json", `{"index_version":1,"scope":"other","artifacts":[]}`), "index-mismatch"},
	} {
		t.Run(c.what, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out.json")
			code, _, stderr := runMur(t, "index", next, "--scope", "acme", "--release", "v1", "--merge", c.merge, "-o", out)
			if code != 1 || !strings.HasPrefix(stderr, "mur: "+c.token+": ") {
				t.Fatalf("exit %d, stderr %q; want %s", code, stderr, c.token)
			}
			if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
				t.Error("an index was written after a refused merge")
			}
		})
	}
}

func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// writeScopedZip writes a zip whose murmur.yaml names other/grep: built by hand, because mur pack
// itself refuses a scoped name.
func writeScopedZip(t *testing.T, path string) {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range [][2]string{{"murmur.yaml", "name: other/grep\nversion: 1.0.0\n"}, {"capsule.wasm", "\x00asm\x01\x00\x00\x00"}} {
		w, err := zw.Create(f[0])
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(f[1]))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}
