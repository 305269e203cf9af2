package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
)

// cacheHome makes a home whose store holds two blobs, one of them recorded under two names.
func cacheHome(t *testing.T) (string, *cas.Store, digest.Digest, digest.Digest) {
	t.Helper()
	h := filepath.Join(t.TempDir(), "home")
	s, err := cas.Open(filepath.Join(h, "cas"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.Ingest(context.Background(), strings.NewReader("artifact a"), -1, "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Ingest(context.Background(), strings.NewReader("artifact b"), -1, "")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, r := range []cas.Record{
		{Time: now, Ref: "acme/grep@1.2.0", Name: "acme/grep", Version: "1.2.0", Digest: a, Size: 10, Source: "github:acme/murmur-artifacts", Release: "v1.2.0", Asset: "grep.mur.zip", Transferred: 10, Outcome: cas.OutcomePulled},
		{Time: now, Ref: "acme/grep", Name: "acme/grep", Version: "1.2.0", Digest: a, Outcome: cas.OutcomeCacheHit},
		{Time: now, Ref: "acme/mirror@1.2.0", Name: "acme/mirror", Version: "1.2.0", Digest: a, Outcome: cas.OutcomePulled},
		{Time: now, Ref: "acme/broken@1", Name: "acme/broken", Version: "1", Digest: b, Outcome: cas.OutcomeFailed, Error: "not-found: acme/grep@1.2.0 was not found in oci://r/m (a very long reason that the table leaves to --json)"},
	} {
		if err := s.AppendRecord(r); err != nil {
			t.Fatal(err)
		}
	}
	return h, s, a, b
}

func TestCacheLs(t *testing.T) {
	t.Parallel()
	h, _, a, b := cacheHome(t)
	code, out, errOut := runMur(t, "--home", h, "cache", "ls", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var ls struct {
		Blobs []cacheEntry
		Error *jsonError
	}
	if err := json.Unmarshal([]byte(out), &ls); err != nil || ls.Error != nil {
		t.Fatalf("%v in %s", err, out)
	}
	entries := ls.Blobs
	got := map[digest.Digest]cacheEntry{}
	for _, e := range entries {
		got[e.Digest] = e
	}
	if len(entries) != 2 || got[a].Size != 10 || got[b].Size != 10 {
		t.Fatalf("ls = %+v", entries)
	}
	if n := got[a].Names; len(n) != 2 || n[0] != "acme/grep@1.2.0" || n[1] != "acme/mirror@1.2.0" {
		t.Fatalf("names of a = %v", n)
	}
	if len(got[b].Names) != 0 {
		t.Fatalf("a failed pull gave b the names %v", got[b].Names)
	}

	code, out, _ = runMur(t, "cache", "ls", "--home", h)
	if code != 0 || !strings.Contains(out, string(a)) || !strings.Contains(out, "acme/grep@1.2.0, acme/mirror@1.2.0") {
		t.Fatalf("exit %d, text ls:\n%s", code, out)
	}
	if code, _, errOut := runMur(t, "--home", h, "cache", "ls", "extra"); code != 2 || !strings.Contains(errOut, "mur: usage:") {
		t.Fatalf("ls with an argument: exit %d, %s", code, errOut)
	}
}

func TestCacheVerify(t *testing.T) {
	t.Parallel()
	h, s, a, b := cacheHome(t)
	// The summary is the result: on stdout, -q or not.
	if code, out, errOut := runMur(t, "--home", h, "-q", "cache", "verify"); code != 0 || !strings.HasPrefix(out, "checked 2 blobs, ") || errOut != "" {
		t.Fatalf("clean store: exit %d, %q, %s", code, out, errOut)
	}
	p := s.Path(b)
	os.Chmod(p, 0o644)
	os.WriteFile(p, []byte("artifact B"), 0o444)
	code, out, errOut := runMur(t, "--home", h, "cache", "verify")
	if code != 1 || !strings.Contains(errOut, "mur: integrity:") {
		t.Fatalf("damaged store: exit %d, stderr %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], string(b)+": ") || !strings.HasPrefix(lines[1], "checked ") {
		t.Fatalf("want one line naming %s, got:\n%s", b, out)
	}
	if s.Has(b) || !s.Has(a) {
		t.Fatal("the damaged blob was not quarantined, or the good one was")
	}
	code, out, _ = runMur(t, "--home", h, "--json", "cache", "verify")
	var rep cas.VerifyReport
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep.Checked != 1 || len(rep.Damaged) != 0 {
		t.Fatalf("after quarantine: exit %d, %s", code, out)
	}
}

func TestCacheGC(t *testing.T) {
	t.Parallel()
	h, s, a, b := cacheHome(t)
	old := time.Now().Add(-40 * 24 * time.Hour)
	os.Chtimes(s.Path(a), old, old)
	os.Chtimes(filepath.Join(s.Root(), "uses", a.Encoded()), old, old)

	code, out, errOut := runMur(t, "--home", h, "cache", "gc", "--dry-run")
	if code != 0 || !strings.Contains(out, "would remove "+string(a)) || strings.Contains(out, string(b)) {
		t.Fatalf("dry run: exit %d, %s %s", code, out, errOut)
	}
	if !s.Has(a) {
		t.Fatal("dry run removed a blob")
	}
	code, out, errOut = runMur(t, "--home", h, "--json", "cache", "gc")
	var rep cas.GCReport
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || len(rep.Blobs) != 1 || rep.Blobs[0].Digest != a {
		t.Fatalf("gc: exit %d, %s %s", code, out, errOut)
	}
	if s.Has(a) || !s.Has(b) {
		t.Fatal("gc removed the wrong blob")
	}
	if code, out, _ := runMur(t, "--home", h, "cache", "gc", "--older-than", "0s"); code != 0 || !strings.Contains(out, "removed "+string(b)) {
		t.Fatalf("gc --older-than 0s: exit %d, %s", code, out)
	}
	if code, _, errOut := runMur(t, "--home", h, "cache", "gc", "--older-than", "-1h"); code != 2 || !strings.Contains(errOut, "--older-than") {
		t.Fatalf("negative --older-than: exit %d, %s", code, errOut)
	}
}

func TestCacheRecordsAndPath(t *testing.T) {
	t.Parallel()
	h, _, a, _ := cacheHome(t)
	code, out, _ := runMur(t, "--home", h, "--json", "cache", "records", "--digest", string(a))
	var recs struct {
		Records []struct {
			cas.Record
			Error *jsonError
		}
	}
	if code != 0 || json.Unmarshal([]byte(out), &recs) != nil || len(recs.Records) != 3 {
		t.Fatalf("records --digest: exit %d, %s", code, out)
	}
	// The bare hex of murmur.lock works too.
	code, out, _ = runMur(t, "--home", h, "cache", "records", "--digest", a.Encoded())
	if code != 0 || strings.Count(out, string(a)) != 3 || !strings.Contains(out, "github:acme/murmur-artifacts v1.2.0/grep.mur.zip") {
		t.Fatalf("text records: exit %d\n%s", code, out)
	}
	code, out, _ = runMur(t, "--home", h, "cache", "records")
	if code != 0 || !strings.Contains(out, "failed: not-found ") || strings.Contains(out, "very long reason") {
		t.Fatalf("records: the table shows the outcome's token, not its sentence: exit %d\n%s", code, out)
	}
	code, out, _ = runMur(t, "--home", h, "--json", "cache", "records")
	if code != 0 || !strings.Contains(out, `"token": "not-found"`) || !strings.Contains(out, `"message": "acme/grep@1.2.0 was not found in oci://r/m (a very long reason`) {
		t.Fatalf("records --json keeps the error as token and message: exit %d\n%s", code, out)
	}
	for _, bad := range []string{"sha512:" + strings.Repeat("ab", 64), "sha256:xyz", "zz"} {
		if code, _, errOut := runMur(t, "--home", h, "cache", "records", "--digest", bad); code != 2 || !strings.Contains(errOut, "mur: usage:") {
			t.Fatalf("--digest %s: exit %d, %s", bad, code, errOut)
		}
	}
	code, out, _ = runMur(t, "--home", h, "cache", "path")
	if code != 0 || strings.TrimSpace(out) != filepath.Join(h, "cas") {
		t.Fatalf("path: exit %d, %q", code, out)
	}
	code, out, _ = runMur(t, "--home", h, "--json", "cache", "path")
	var p map[string]string
	if code != 0 || json.Unmarshal([]byte(out), &p) != nil || p["path"] != filepath.Join(h, "cas") {
		t.Fatalf("path --json: exit %d, %q", code, out)
	}
}

func TestCacheGCKeepsWhatALockPins(t *testing.T) {
	t.Parallel()
	h, s, a, b := cacheHome(t)
	dir := t.TempDir()
	lockPath := filepath.Join(dir, "murmur.lock")
	lockText := "lock_version: 3\nartifacts:\n  - name: acme/grep\n    resolved_version: 1.2.0\n    sha256:\n      any: " + a.Encoded() + "\n    origin: operator\n"
	if err := os.WriteFile(lockPath, []byte(lockText), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runMur(t, "--home", h, "cache", "gc", "--older-than", "0s", "--keep", lockPath)
	if code != 0 {
		t.Fatalf("gc --keep: exit %d, %s", code, errOut)
	}
	if !s.Has(a) || s.Has(b) || !strings.Contains(out, "removed "+string(b)) {
		t.Fatalf("gc --keep kept the wrong blobs:\n%s", out)
	}
	// A lock that isn't there is refused rather than read as keeping nothing.
	missing := filepath.Join(dir, "nope.lock")
	code, _, errOut = runMur(t, "--home", h, "cache", "gc", "--older-than", "0s", "--keep", missing)
	if code != 2 || !strings.Contains(errOut, missing) || !s.Has(a) {
		t.Fatalf("gc --keep of a missing lock: exit %d, %s", code, errOut)
	}
	// A damaged lock stops gc before it removes anything.
	os.WriteFile(lockPath, []byte("lock_version: 9\n"), 0o644)
	code, _, errOut = runMur(t, "--home", h, "cache", "gc", "--older-than", "0s", "--keep", lockPath)
	if code == 0 || !s.Has(a) {
		t.Fatalf("gc --keep of a bad lock: exit %d, %s", code, errOut)
	}
}
