package github

import (
	"archive/zip"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
)

func TestIndexFiles(t *testing.T) {
	dir := t.TempDir()
	grepFile := artifacttest.File(t, dir, "grep", "1.2.0", artifacttest.Tagged("g"))
	findFile := artifacttest.File(t, dir, "find", "0.3.0+b1", artifacttest.Tagged("f"))
	// A time with an offset and a fraction is written in UTC, to the second.
	at := time.Date(2026, 3, 4, 7, 8, 9, 500, time.FixedZone("CET", 3600))
	ix, err := IndexFilesAt([]string{grepFile, findFile}, "acme", "v1.2.0", "linux-x86_64", at)
	if err != nil {
		t.Fatal(err)
	}
	if ix.IndexVersion != 1 || ix.Scope != "acme" || len(ix.Artifacts) != 2 {
		t.Fatalf("index %+v", ix)
	}
	byName := map[string]IndexEntry{}
	for _, e := range ix.Artifacts {
		byName[e.Name] = e
	}
	for file, want := range map[string]IndexEntry{
		grepFile: {Name: "acme/grep", Version: "1.2.0", Asset: "grep-1.2.0.mur.zip"},
		findFile: {Name: "acme/find", Version: "0.3.0+b1", Asset: "find-0.3.0+b1.mur.zip"},
	} {
		sum, size := artifacttest.FileSum(t, file)
		want.Platform, want.Release, want.Size, want.SHA256 = "linux-x86_64", "v1.2.0", size, sum
		want.Published = "2026-03-04T06:08:09Z"
		if got := byName[want.Name]; got != want {
			t.Errorf("entry %+v, want %+v", got, want)
		}
	}

	// The written index is deterministic, whatever the order of the files, and parses back.
	again, err := IndexFilesAt([]string{findFile, grepFile}, "acme", "v1.2.0", "linux-x86_64", at)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ix.Marshal(), again.Marshal()) {
		t.Fatalf("the index depends on the order of the files:\n%s\n%s", ix.Marshal(), again.Marshal())
	}
	parsed, err := ParseIndex(ix.Marshal())
	if err != nil {
		t.Fatalf("ParseIndex of what IndexFiles wrote: %v", err)
	}
	if !bytes.Equal(parsed.Marshal(), ix.Marshal()) {
		t.Fatal("the index does not round-trip through ParseIndex")
	}
	if e, ok := parsed.Lookup("acme/grep", "1.2.0", "linux-x86_64"); !ok || e.SHA256 != byName["acme/grep"].SHA256 {
		t.Fatalf("Lookup in the written index: %+v %v", e, ok)
	}

	// Without a time given, the entries are published now.
	before := time.Now().UTC().Truncate(time.Second)
	now, err := IndexFiles([]string{grepFile}, "acme", "v1.2.0", "any")
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now().UTC()
	if p, err := time.Parse(time.RFC3339, now.Artifacts[0].Published); err != nil || p.Before(before) || p.After(after) || !strings.HasSuffix(now.Artifacts[0].Published, "Z") {
		t.Fatalf("published %q, want a UTC time between %v and %v", now.Artifacts[0].Published, before, after)
	}

	// The same file twice is one entry.
	twice, err := IndexFiles([]string{grepFile, grepFile}, "acme", "v1.2.0", "any")
	if err != nil || len(twice.Artifacts) != 1 {
		t.Fatalf("the same file twice: %v, %+v", err, twice)
	}
}

func TestIndexFilesRefusals(t *testing.T) {
	dir := t.TempDir()
	good := artifacttest.File(t, dir, "grep", "1.2.0", artifacttest.Tagged("a"))
	otherDir := t.TempDir()
	sameVersion := artifacttest.File(t, otherDir, "grep", "1.2.0", artifacttest.Tagged("b"))

	// A packed name that carries a scope is not a bare name: the reader refuses it.
	scoped := filepath.Join(dir, "scoped.mur.zip")
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, data := range map[string]string{"murmur.yaml": "name: other/grep\nversion: 1.0.0\n", "capsule.wasm": "\x00asm\x01\x00\x00\x00"} {
		f, _ := zw.Create(name)
		f.Write([]byte(data))
	}
	zw.Close()
	os.WriteFile(scoped, buf.Bytes(), 0o644)

	notZip := filepath.Join(dir, "notes.mur.zip")
	os.WriteFile(notZip, []byte("not a zip"), 0o644)

	for _, c := range []struct {
		what           string
		files          []string
		scope, release string
		tok            errs.Token
		mentions       []string
	}{
		{"scope local", []string{good}, "local", "v1", errs.Usage, []string{"local"}},
		{"invalid scope", []string{good}, "Acme", "v1", errs.Usage, []string{"--scope"}},
		{"no release", []string{good}, "acme", "", errs.Usage, []string{"--release"}},
		{"scoped packed name", []string{scoped}, "acme", "v1", errs.InvalidArtifact, []string{scoped, "other/grep"}},
		{"not a zip", []string{notZip}, "acme", "v1", errs.InvalidArtifact, []string{notZip}},
		{"missing file", []string{filepath.Join(dir, "gone.mur.zip")}, "acme", "v1", errs.NotFound, []string{"gone.mur.zip"}},
		{"one version, two hashes", []string{good, sameVersion}, "acme", "v1", errs.IndexMismatch, []string{"acme/grep@1.2.0"}},
	} {
		t.Run(c.what, func(t *testing.T) {
			ix, err := IndexFiles(c.files, c.scope, c.release, "any")
			if ix != nil {
				t.Errorf("an index was returned with the error")
			}
			errtest.WantToken(t, err, c.tok, c.mentions...)
		})
	}
}
