package publish_test

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/fetch/github"
	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/publish"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/internal/testfakes/errtest"
	"github.com/murmur-nexus/mur/internal/testfakes/packtest"
	"github.com/murmur-nexus/mur/lock"
)

func fileSum(t *testing.T, path string) (string, int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), int64(len(b))
}

func TestIndexFiles(t *testing.T) {
	dir := t.TempDir()
	grepFile := packtest.File(t, dir, "grep", "1.2.0", packtest.Tagged("g"))
	findFile := packtest.File(t, dir, "find", "0.3.0+b1", packtest.Tagged("f"))
	ix, err := publish.IndexFiles([]string{grepFile, findFile}, "acme", "v1.2.0", "linux-x86_64")
	if err != nil {
		t.Fatal(err)
	}
	if ix.IndexVersion != 1 || ix.Scope != "acme" || len(ix.Artifacts) != 2 {
		t.Fatalf("index %+v", ix)
	}
	byName := map[string]github.IndexEntry{}
	for _, e := range ix.Artifacts {
		byName[e.Name] = e
	}
	for file, want := range map[string]github.IndexEntry{
		grepFile: {Name: "acme/grep", Version: "1.2.0", Asset: "grep-1.2.0.mur.zip"},
		findFile: {Name: "acme/find", Version: "0.3.0+b1", Asset: "find-0.3.0+b1.mur.zip"},
	} {
		sum, size := fileSum(t, file)
		want.Platform, want.Release, want.Size, want.SHA256 = "linux-x86_64", "v1.2.0", size, sum
		if got := byName[want.Name]; got != want {
			t.Errorf("entry %+v, want %+v", got, want)
		}
	}

	// The written index is deterministic, whatever the order of the files, and parses back.
	again, err := publish.IndexFiles([]string{findFile, grepFile}, "acme", "v1.2.0", "linux-x86_64")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ix.Marshal(), again.Marshal()) {
		t.Fatalf("the index depends on the order of the files:\n%s\n%s", ix.Marshal(), again.Marshal())
	}
	parsed, err := github.ParseIndex(ix.Marshal())
	if err != nil {
		t.Fatalf("ParseIndex of what IndexFiles wrote: %v", err)
	}
	if !bytes.Equal(parsed.Marshal(), ix.Marshal()) {
		t.Fatal("the index does not round-trip through ParseIndex")
	}
	if e, ok := parsed.Lookup("acme/grep", "1.2.0", "linux-x86_64"); !ok || e.SHA256 != byName["acme/grep"].SHA256 {
		t.Fatalf("Lookup in the written index: %+v %v", e, ok)
	}

	// The same file twice is one entry.
	twice, err := publish.IndexFiles([]string{grepFile, grepFile}, "acme", "v1.2.0", "any")
	if err != nil || len(twice.Artifacts) != 1 {
		t.Fatalf("the same file twice: %v, %+v", err, twice)
	}
}

func TestIndexFilesRefusals(t *testing.T) {
	dir := t.TempDir()
	good := packtest.File(t, dir, "grep", "1.2.0", packtest.Tagged("a"))
	otherDir := t.TempDir()
	sameVersion := packtest.File(t, otherDir, "grep", "1.2.0", packtest.Tagged("b"))

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
		{"one version, two hashes", []string{good, sameVersion}, "acme", "v1", errs.LockConflict, []string{"acme/grep@1.2.0"}},
	} {
		t.Run(c.what, func(t *testing.T) {
			ix, err := publish.IndexFiles(c.files, c.scope, c.release, "any")
			if ix != nil {
				t.Errorf("an index was returned with the error")
			}
			errtest.WantToken(t, err, c.tok, c.mentions...)
		})
	}
}

func TestFromFile(t *testing.T) {
	file := packtest.File(t, t.TempDir(), "grep", "1.2.0", packtest.Tagged("x"))
	it, err := publish.FromFile(file, "acme", "any")
	if err != nil {
		t.Fatal(err)
	}
	sum, size := fileSum(t, file)
	if it.Path != file || it.Desc.Name != (ref.Name{Scope: "acme", Name: "grep"}) || it.Desc.Version != "1.2.0" || it.Desc.Platform != "any" ||
		it.Desc.Digest.Encoded() != sum || it.Desc.Size != size || it.Desc.Title != "grep-1.2.0.mur.zip" {
		t.Fatalf("item %+v", it)
	}

	_, err = publish.FromFile(file, "local", "any")
	errtest.WantToken(t, err, errs.Usage, "local")
	_, err = publish.FromFile(file, "", "any")
	errtest.WantToken(t, err, errs.Usage, "--scope")
	_, err = publish.FromFile(filepath.Join(t.TempDir(), "gone.mur.zip"), "acme", "any")
	errtest.WantToken(t, err, errs.NotFound, "gone.mur.zip")

	// Push sends the file's bytes, and the store serves the same digest back.
	st, err := ocistore.Open("oci-layout:"+filepath.Join(t.TempDir(), "store"), ocistore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := publish.Push(context.Background(), st, it); err != nil {
		t.Fatal(err)
	}
	d, err := st.Resolve(context.Background(), it.Desc.Name, "1.2.0", "any")
	if err != nil || d.Digest != it.Desc.Digest || d.Size != size {
		t.Fatalf("Resolve after Push: %+v, %v", d, err)
	}
}

// casWithLock ingests file into a fresh CAS and pins it in a lock for platform.
func casWithLock(t *testing.T, file, name, version, platform string) (*cas.Store, *lock.Lock, digest.Digest) {
	t.Helper()
	s, err := cas.Open(filepath.Join(t.TempDir(), "cas"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := s.Ingest(context.Background(), f, -1, "")
	if err != nil {
		t.Fatal(err)
	}
	l := &lock.Lock{Scopes: map[string]lock.ScopePin{}}
	if err := l.Upsert(name, version, platform, d.Encoded(), "", false); err != nil {
		t.Fatal(err)
	}
	return s, l, d
}

func TestFromCAS(t *testing.T) {
	file := packtest.File(t, t.TempDir(), "grep", "1.2.0", packtest.Tagged("y"))
	s, l, d := casWithLock(t, file, "acme/grep", "1.2.0", "any")
	grep := ref.Name{Scope: "acme", Name: "grep"}
	for _, version := range []string{"1.2.0", ref.Latest} {
		it, err := publish.FromCAS(s, l, ref.Ref{Name: grep, Version: version}, "any")
		if err != nil {
			t.Fatalf("FromCAS %s: %v", version, err)
		}
		_, size := fileSum(t, file)
		if it.Path != s.Path(d) || it.Desc.Name != grep || it.Desc.Version != "1.2.0" || it.Desc.Platform != "any" ||
			it.Desc.Digest != d || it.Desc.Size != size || it.Desc.Title != "grep-1.2.0.mur.zip" {
			t.Fatalf("item %+v", it)
		}
	}

	_, err := publish.FromCAS(s, l, ref.Ref{Name: grep, Version: "1.3.0"}, "any")
	errtest.WantToken(t, err, errs.NotFound, "1.2.0", "1.3.0")
	_, err = publish.FromCAS(s, l, ref.Ref{Name: ref.Name{Scope: "acme", Name: "find"}, Version: "1.0.0"}, "any")
	errtest.WantToken(t, err, errs.NotFound, "acme/find", "mur pull")

	// Scope local came from a file on disk: it is never published, even from the CAS.
	ls, ll, _ := casWithLock(t, file, "local/grep", "1.2.0", "any")
	_, err = publish.FromCAS(ls, ll, ref.Ref{Name: ref.Name{Scope: "local", Name: "grep"}, Version: "1.2.0"}, "any")
	errtest.WantToken(t, err, errs.Usage, "local/grep", "--scope")

	// A damaged blob is refused, not mirrored.
	os.Chmod(s.Path(d), 0o644)
	os.WriteFile(s.Path(d), []byte("damaged"), 0o644)
	_, err = publish.FromCAS(s, l, ref.Ref{Name: grep, Version: "1.2.0"}, "any")
	errtest.WantToken(t, err, errs.Integrity, d.String())
	// It went to quarantine; asking again finds it missing.
	_, err = publish.FromCAS(s, l, ref.Ref{Name: grep, Version: "1.2.0"}, "any")
	errtest.WantToken(t, err, errs.NotFound)
}

func TestFromCASPlatforms(t *testing.T) {
	file := packtest.File(t, t.TempDir(), "grep", "1.2.0", packtest.Tagged("z"))
	s, l, d := casWithLock(t, file, "acme/grep", "1.2.0", "linux-x86_64")
	grep := ref.Ref{Name: ref.Name{Scope: "acme", Name: "grep"}, Version: "1.2.0"}
	it, err := publish.FromCAS(s, l, grep, "linux-x86_64")
	if err != nil {
		t.Fatal(err)
	}
	if it.Desc.Platform != "linux-x86_64" || it.Desc.Digest != d {
		t.Fatalf("item %+v", it)
	}
	_, err = publish.FromCAS(s, l, grep, "darwin-aarch64")
	errtest.WantToken(t, err, errs.NotFound, "darwin-aarch64")
}
