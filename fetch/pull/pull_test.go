package pull_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/fetch/github/githubtest"
	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/fetch/stage"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
)

func TestPullStagesLocksAndRecords(t *testing.T) {
	t.Parallel()
	w := pulltest.NewWorld(t)
	st := pulltest.LayoutStore(t)
	p := pulltest.Pack(t, "grep", "1.0.0", 1)
	pulltest.Push(t, st, grep, "1.0.0", "any", p)

	res := w.MustPull(w.Puller(st), pulltest.Req(grep, "1.0.0"))
	got := res[0]
	d := p.Digest()
	if got.Name != "acme/grep" || got.Version != "1.0.0" || got.Platform != "any" || got.Digest != d.String() ||
		got.Size != int64(len(p.Zip)) || got.Origin != st.String() || got.CacheHit || got.Transferred != int64(len(p.Zip)) ||
		got.Tools != stage.StagedDir(w.Proj.Tools(), grep) || got.Error != "" {
		t.Fatalf("result %+v", got)
	}
	if b, err := os.ReadFile(w.CAS.Path(d)); err != nil || !bytes.Equal(b, p.Zip) {
		t.Fatalf("CAS blob %s: %v", d, err)
	}
	l, err := lock.Read(w.Proj.LockPath())
	if err != nil {
		t.Fatal(err)
	}
	if e := l.Find("acme/grep"); e == nil || e.ResolvedVersion != "1.0.0" || e.SHA256.Any != d.Encoded() || len(e.SHA256.Platforms) != 0 {
		t.Fatalf("lock entry %+v", e)
	}

	// tools/acme/grep holds plain copies of the packed manifest and payload, and the marker.
	dir := stage.StagedDir(w.Proj.Tools(), grep)
	if dir != filepath.Join(w.Proj.Dir, "tools", "acme", "grep") {
		t.Fatalf("staged at %s", dir)
	}
	for file, want := range map[string][]byte{"murmur.yaml": []byte(p.YAML), "capsule.wasm": p.Wasm} {
		path := filepath.Join(dir, file)
		fi, err := os.Lstat(path)
		if err != nil {
			t.Fatal(err)
		}
		if !fi.Mode().IsRegular() {
			t.Errorf("%s is %s, not a plain file", path, fi.Mode())
		}
		if b, _ := os.ReadFile(path); !bytes.Equal(b, want) {
			t.Errorf("%s does not hold the packed %s", path, file)
		}
		if blob, err := os.Stat(w.CAS.Path(d)); err == nil && os.SameFile(fi, blob) {
			t.Errorf("%s is a link to the CAS blob", path)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ".mur-staged.json")); err != nil {
		t.Fatalf("no %s: %v", ".mur-staged.json", err)
	}
	if err := stage.CheckStaged(w.Proj.Tools(), grep, d); err != nil {
		t.Fatalf("CheckStaged after a pull: %v", err)
	}

	rs := w.Records()
	if len(rs) != 1 {
		t.Fatalf("%d records, want 1: %+v", len(rs), rs)
	}
	if r := rs[0]; r.Outcome != cas.OutcomePulled || r.Source != st.String() || r.Digest != d || r.Ref != "acme/grep@1.0.0" ||
		r.Name != "acme/grep" || r.Version != "1.0.0" || r.Platform != "any" || r.Size != int64(len(p.Zip)) || r.Transferred != int64(len(p.Zip)) {
		t.Errorf("record %+v", r)
	}

	// The same pull again is a cache hit that asks no store: a store that would fail proves it.
	res = w.MustPull(w.Puller(pulltest.OpenStore(t, "oci://127.0.0.1:1/murmur", ocistore.Options{Retries: -1})), pulltest.Req(grep, "1.0.0"))
	if !res[0].CacheHit || res[0].Transferred != 0 || res[0].Digest != d.String() || res[0].Origin != "cas" {
		t.Fatalf("second pull %+v", res[0])
	}
	rs = w.Records()
	if len(rs) != 2 || rs[1].Outcome != cas.OutcomeCacheHit || rs[1].Digest != d || rs[1].Transferred != 0 {
		t.Fatalf("records after a cache hit: %+v", rs)
	}
}

func TestPullVersionChange(t *testing.T) {
	t.Parallel()
	w := pulltest.NewWorld(t)
	st := pulltest.LayoutStore(t)
	v1 := pulltest.Pack(t, "grep", "1.0.0", 13)
	v2 := pulltest.Pack(t, "grep", "2.0.0", 14)
	pulltest.Push(t, st, grep, "1.0.0", "any", v1)
	pulltest.Push(t, st, grep, "2.0.0", "any", v2)
	w.MustPull(w.Puller(st), pulltest.Req(grep, "1.0.0"))
	before := w.State()

	_, err := w.Pull(w.Puller(st), pulltest.Req(grep, "2.0.0"))
	errtest.WantToken(t, err, errs.LockConflict, "1.0.0", "2.0.0", "mur pull --update acme/grep@2.0.0")
	w.AssertUnchanged(before)
	w.AssertFailedRecord(grep, errs.LockConflict)

	// "latest" follows the lock, not the store.
	res := w.MustPull(w.Puller(st), pulltest.Req(grep, ref.Latest))
	if res[0].Version != "1.0.0" || !res[0].CacheHit {
		t.Fatalf("latest with a pin: %+v", res[0])
	}

	u := pulltest.Req(grep, "2.0.0")
	u.Update = true
	res = w.MustPull(w.Puller(st), u)
	if res[0].Version != "2.0.0" || res[0].Digest != v2.Digest().String() {
		t.Fatalf("update result %+v", res[0])
	}
	l, err := lock.Read(w.Proj.LockPath())
	if err != nil {
		t.Fatal(err)
	}
	if e := l.Find("acme/grep"); e == nil || e.ResolvedVersion != "2.0.0" || e.SHA256.Any != v2.Digest().Encoded() {
		t.Fatalf("lock after update: %+v", e)
	}
	// tools/ follows the lock.
	if b, _ := os.ReadFile(filepath.Join(stage.StagedDir(w.Proj.Tools(), grep), "capsule.wasm")); !bytes.Equal(b, v2.Wasm) {
		t.Error("tools/acme/grep was not restaged with 2.0.0")
	}
	if err := stage.CheckStaged(w.Proj.Tools(), grep, v2.Digest()); err != nil {
		t.Error(err)
	}
}

// TestPullPlatforms: hashes for a new platform merge into the lock's platforms map, and an
// "any" payload joins per-platform pins under the platform that pulled it.
func TestPullPlatforms(t *testing.T) {
	t.Parallel()
	w := pulltest.NewWorld(t)
	st := pulltest.LayoutStore(t)
	linux := pulltest.Pack(t, "grep", "1.0.0", 15)
	arm := pulltest.Pack(t, "grep", "1.0.0", 16)
	anyP := pulltest.Pack(t, "grep", "1.0.0", 17)
	pulltest.Push(t, st, grep, "1.0.0", "linux-x86_64", linux)
	pulltest.Push(t, st, grep, "1.0.0", "linux-aarch64", arm)
	pulltest.Push(t, st, grep, "1.0.0", "any", anyP)

	pl := w.Puller(st)
	res := w.MustPull(pl, pulltest.Req(grep, "1.0.0"))
	if res[0].Platform != "linux-x86_64" || res[0].Digest != linux.Digest().String() {
		t.Fatalf("linux-x86_64 pull %+v", res[0])
	}
	pl.Platform = "linux-aarch64"
	res = w.MustPull(pl, pulltest.Req(grep, "1.0.0"))
	if res[0].Platform != "linux-aarch64" || res[0].Digest != arm.Digest().String() {
		t.Fatalf("linux-aarch64 pull %+v", res[0])
	}
	l, err := lock.Read(w.Proj.LockPath())
	if err != nil {
		t.Fatal(err)
	}
	e := l.Find("acme/grep")
	want := map[string]string{"linux-x86_64": linux.Digest().Encoded(), "linux-aarch64": arm.Digest().Encoded()}
	if e == nil || e.SHA256.Any != "" || fmt.Sprint(e.SHA256.Platforms) != fmt.Sprint(want) {
		t.Fatalf("lock entry %+v, want platforms %v", e, want)
	}
	raw, _ := os.ReadFile(w.Proj.LockPath())
	if !strings.Contains(string(raw), "platforms:") {
		t.Fatalf("murmur.lock has no platforms map:\n%s", raw)
	}
	// Each platform's pin is now a cache hit for that platform.
	pl.Platform = "linux-x86_64"
	if res := w.MustPull(pl, pulltest.Req(grep, "1.0.0")); !res[0].CacheHit || res[0].Digest != linux.Digest().String() {
		t.Fatalf("pinned linux-x86_64 pull %+v", res[0])
	}

	// darwin-aarch64 gets the "any" payload; the entry pins per platform, so the payload is
	// pinned under darwin-aarch64's own key and one lock serves the whole fleet.
	pl.Platform = "darwin-aarch64"
	res = w.MustPull(pl, pulltest.Req(grep, "1.0.0"))
	if res[0].Digest != anyP.Digest().String() {
		t.Fatalf("darwin-aarch64 pull %+v", res[0])
	}
	if l, err = lock.Read(w.Proj.LockPath()); err != nil {
		t.Fatal(err)
	}
	want["darwin-aarch64"] = anyP.Digest().Encoded()
	if e := l.Find("acme/grep"); e.SHA256.Any != "" || fmt.Sprint(e.SHA256.Platforms) != fmt.Sprint(want) {
		t.Fatalf("lock entry %+v, want platforms %v", e, want)
	}
	// tools/ shows what this machine runs, not the other platforms' payloads.
	if err := stage.CheckStaged(w.Proj.Tools(), grep, mustDigest(t, l, ref.HostPlatform())); err != nil && ref.HostPlatform() == "linux-x86_64" {
		t.Fatalf("tools/ no longer matches this machine's pin: %v", err)
	}
}

func mustDigest(t *testing.T, l *lock.Lock, platform string) digest.Digest {
	t.Helper()
	hex, _, ok := l.Find("acme/grep").Digest(platform)
	if !ok {
		t.Fatalf("no pin for %s", platform)
	}
	d, err := ref.DigestFromHex(hex)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestPullOffline(t *testing.T) {
	t.Parallel()
	f := registrytest.StartFaulty(t)
	st := pulltest.FaultyStore(t, f, ocistore.Options{})
	p := pulltest.Pack(t, "grep", "1.0.0", 18)
	pulltest.Push(t, st, grep, "1.0.0", "any", p)

	// Cold: nothing pinned, nothing cached.
	w := pulltest.NewWorld(t)
	pl := w.Puller(st)
	pl.Offline = true
	before := w.State()
	sent := f.Requests()
	_, err := w.Pull(pl, pulltest.Req(grep, "1.0.0"))
	errtest.WantToken(t, err, errs.Offline, "acme/grep@1.0.0", "mur warm")
	w.AssertUnchanged(before)
	w.AssertFailedRecord(grep, errs.Offline)
	if n := f.Requests() - sent; n != 0 {
		t.Errorf("an offline pull made %d requests", n)
	}

	// Warm it, then pull again offline and online: no request either way.
	w.MustPull(w.Puller(st), pulltest.Req(grep, "1.0.0"))
	for _, offline := range []bool{true, false} {
		pl := w.Puller(st)
		pl.Offline = offline
		sent := f.Requests()
		res := w.MustPull(pl, pulltest.Req(grep, "1.0.0"), pulltest.Req(grep, "1.0.0"))
		if !res[0].CacheHit || res[0].Digest != p.Digest().String() {
			t.Fatalf("warm pull (offline %v): %+v", offline, res[0])
		}
		if n := f.Requests() - sent; n != 0 {
			t.Errorf("a warm locked pull (offline %v) made %d requests", offline, n)
		}
	}

	// Pinned but evicted: offline names the artifact and changes nothing.
	if err := os.Remove(w.CAS.Path(p.Digest())); err != nil {
		t.Fatal(err)
	}
	before = w.State()
	sent = f.Requests()
	_, err = w.Pull(pl, pulltest.Req(grep, "1.0.0"))
	errtest.WantToken(t, err, errs.Offline, "acme/grep@1.0.0")
	w.AssertUnchanged(before)
	if n := f.Requests() - sent; n != 0 {
		t.Errorf("an offline pull made %d requests", n)
	}
}

func TestPullFileStore(t *testing.T) {
	t.Parallel()
	w := pulltest.NewWorld(t)
	p := pulltest.Pack(t, "grep", "1.0.0", 19)
	file := filepath.Join(t.TempDir(), "grep-1.0.0.mur.zip")
	if err := os.WriteFile(file, p.Zip, 0o644); err != nil {
		t.Fatal(err)
	}
	fst, err := store.OpenFile(file)
	if err != nil {
		t.Fatal(err)
	}
	d := fst.Descriptor()
	local := ref.Name{Scope: ref.ScopeLocal, Name: "grep"}
	if d.Name != local || d.Version != "1.0.0" || d.Digest != p.Digest() || d.Size != int64(len(p.Zip)) {
		t.Fatalf("descriptor %+v", d)
	}
	r := pull.Request{Asked: file, Name: local, Version: "1.0.0", From: []string{pull.FromStores}}
	res := w.MustPull(w.Puller(fst), r)
	if res[0].Name != "local/grep" || res[0].Digest != p.Digest().String() || res[0].Origin != "file:"+file {
		t.Fatalf("result %+v", res[0])
	}
	l, _ := lock.Read(w.Proj.LockPath())
	if e := l.Find("local/grep"); e == nil || e.ResolvedVersion != "1.0.0" || e.SHA256.Any != p.Digest().Encoded() {
		t.Fatalf("lock entry %+v", e)
	}
	if err := stage.CheckStaged(w.Proj.Tools(), local, p.Digest()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(w.Proj.ToolsDir(), "local", "grep", "capsule.wasm")); err != nil {
		t.Fatal(err)
	}
	if rs := w.Records(); len(rs) != 1 || rs[0].Ref != file || rs[0].Source != "file:"+file {
		t.Fatalf("records %+v", rs)
	}

	// The file changing under the same name is a conflict with the pin, not a silent update.
	if err := os.Remove(w.CAS.Path(p.Digest())); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, pulltest.Pack(t, "grep", "1.0.0", 20).Zip, 0o644); err != nil {
		t.Fatal(err)
	}
	fst, err = store.OpenFile(file)
	if err != nil {
		t.Fatal(err)
	}
	before := w.State()
	_, err = w.Pull(w.Puller(fst), r)
	errtest.WantToken(t, err, errs.LockConflict, p.Digest().String())
	w.AssertUnchanged(before)
}

// TestPackedManifestDisagrees: the pipeline alone checks the packed murmur.yaml, for sources as
// for stores; a source whose asset packs another name or version is an index-mismatch.
func TestPackedManifestDisagrees(t *testing.T) {
	t.Parallel()
	art := func(data []byte) githubtest.Artifact {
		return githubtest.Artifact{Name: "acme/grep", Version: "1.2.0", Release: "v1.2.0", Asset: "grep-1.2.0.mur.zip", Data: data}
	}
	for _, tt := range []struct {
		name, bare, version string
		data                []byte
		tok                 errs.Token
		mentions            []string
	}{
		{"name", "sed", "1.2.0", githubtest.PackArtifact("sed", "1.2.0"), errs.IndexMismatch, []string{`name "sed" and version "1.2.0"`}},
		{"version", "grep", "1.2.1", githubtest.PackArtifact("grep", "1.2.1"), errs.IndexMismatch, []string{`name "grep" and version "1.2.1"`}},
		{"not a zip", "", "", []byte("definitely not a zip file"), errs.InvalidArtifact, []string{"acme/grep@1.2.0"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := pulltest.NewWorld(t)
			fake := githubtest.New(t)
			fake.AddRepo("acme", "murmur-artifacts", 1234567, 7654321)
			a := art(tt.data)
			fake.Publish("acme", "murmur-artifacts", "acme", a)
			before := w.State()
			p := w.Puller()
			p.Source = pulltest.GitHubSource(fake)
			_, err := w.Pull(p, pulltest.Req(grep, "1.2.0"))
			errtest.WantToken(t, err, tt.tok, tt.mentions...)
			w.AssertUnchanged(before)
		})
	}
}

// TestPullRefusesSymlinkedTools: a pull whose tools/<scope> is a symlink is refused before it
// fetches anything, and changes nothing: no blob, no lock, and the symlink's target as it was.
func TestPullRefusesSymlinkedTools(t *testing.T) {
	t.Parallel()
	w := pulltest.NewWorld(t)
	st := pulltest.LayoutStore(t)
	pulltest.Push(t, st, grep, "1.0.0", ref.PlatformAny, pulltest.Pack(t, "grep", "1.0.0", 38))
	outside := t.TempDir()
	if err := os.MkdirAll(filepath.Join(outside, "grep"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "grep", "keep.txt"), []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(w.Proj.ToolsDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(w.Proj.ToolsDir(), "acme")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	before, outsideBefore := w.State(), pulltest.TreeDigest(t, outside)
	p := w.Puller(st)
	p.Platform = "" // this machine's: the platform that stages tools/
	_, err := w.Pull(p, pulltest.Req(grep, "1.0.0"))
	errtest.WantToken(t, err, errs.Denied, link, outside)
	w.AssertUnchanged(before)
	if after := pulltest.TreeDigest(t, outside); after != outsideBefore {
		t.Errorf("the symlink's target changed:\n--- before\n%s\n--- after\n%s", outsideBefore, after)
	}
}
