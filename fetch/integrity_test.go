package fetch_test

import (
	"bytes"
	"context"
	"errors"
	"hash/crc32"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/fetch/github/githubtest"
	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	fpull "github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/stage"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/artifact"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
	"github.com/murmur-nexus/mur/internal/lockedfile"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
)

// latest resolves to the highest version the store holds, and the packed manifest is checked
// against that version, not against the word "latest".
func TestPullLatestFromStores(t *testing.T) {
	f := registrytest.StartFaulty(t)
	for name, st := range map[string]store.Store{"layout": layoutStore(t), "registry": faultyStore(t, f, ocistore.Options{})} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t)
			// Semantic-version order, not the order of strings: 1.10.0 is the highest.
			push(t, st, grep, "1.9.0", "any", pack(t, "grep", "1.9.0", 101))
			v2 := pack(t, "grep", "1.10.0", 102)
			push(t, st, grep, "1.10.0", "any", v2)
			push(t, st, grep, "1.10.0-rc.1", "any", pack(t, "grep", "1.10.0-rc.1", 103))
			res := w.mustPull(w.puller(st), fpull.Request{Asked: "acme/grep", Name: grep, Version: ref.Latest})
			if got := res[0]; got.Version != "1.10.0" || got.Digest != v2.digest().String() {
				t.Fatalf("latest resolved to %s %s, want 1.10.0 %s", got.Version, got.Digest, v2.digest())
			}
			if e := w.readLock().Find("acme/grep"); e == nil || e.ResolvedVersion != "1.10.0" || e.SHA256.Any != v2.digest().Encoded() {
				t.Fatalf("lock entry %+v", e)
			}
			if rs := w.records(); rs[len(rs)-1].Version != "1.10.0" || rs[len(rs)-1].Ref != "acme/grep" {
				t.Fatalf("record %+v", rs[len(rs)-1])
			}
		})
	}
}

// openCounter counts the payloads a store is asked to open.
type openCounter struct {
	store.Store
	opens atomic.Int64
}

func (c *openCounter) Open(ctx context.Context, n ref.Name, d digest.Digest) (io.ReadCloser, error) {
	c.opens.Add(1)
	return c.Store.Open(ctx, n, d)
}

// Two projects on one home: the second resolves to a digest the CAS holds and downloads nothing.
func TestPullReusesTheCASAcrossProjects(t *testing.T) {
	st := &openCounter{Store: layoutStore(t)}
	p := pack(t, "grep", "1.0.0", 104)
	push(t, st, grep, "1.0.0", "any", p)
	first := newWorld(t)
	first.mustPull(first.puller(st), req(grep, "1.0.0"))
	if st.opens.Load() != 1 {
		t.Fatalf("the first pull opened %d payloads", st.opens.Load())
	}
	second := newWorld(t)
	second.cas = first.cas
	res := second.mustPull(second.puller(st), fpull.Request{Asked: "acme/grep", Name: grep, Version: ref.Latest})
	if st.opens.Load() != 1 {
		t.Fatalf("the second project's pull downloaded the blob the CAS holds (%d opens)", st.opens.Load())
	}
	if got := res[0]; !got.CacheHit || got.Transferred != 0 || got.Digest != p.digest().String() || got.Version != "1.0.0" || got.Origin != "cas" {
		t.Fatalf("result %+v, want a cache hit of 1.0.0", got)
	}
	if e := second.readLock().Find("acme/grep"); e == nil || e.SHA256.Any != p.digest().Encoded() {
		t.Fatalf("the second project's lock %+v", e)
	}
	if err := stage.CheckStaged(second.proj.Tools(), grep, p.digest()); err != nil {
		t.Fatalf("the second project's tools/: %v", err)
	}
	rs := second.records()
	if r := rs[len(rs)-1]; r.Outcome != cas.OutcomeCacheHit || r.Transferred != 0 || r.Digest != p.digest() {
		t.Fatalf("record %+v, want a cache hit with 0 bytes transferred", r)
	}
}

// The same through a source: the index names a digest the CAS holds, and no asset is downloaded;
// the scope's owner is still pinned.
func TestPullReusesTheCASFromASource(t *testing.T) {
	fake := githubtest.New(t)
	fake.AddRepo("acme", "murmur-artifacts", 1234567, 7654321)
	a := githubtest.Artifact{Name: "acme/grep", Version: "1.2.0", Release: "v1.2.0", Asset: "grep-1.2.0.mur.zip", Data: githubtest.PackArtifact("grep", "1.2.0")}
	fake.Publish("acme", "murmur-artifacts", "acme", a)
	first := newWorld(t)
	p := first.puller()
	p.Source = githubSource(fake)
	first.mustPull(p, req(grep, "1.2.0"))
	// Every download of the asset, through its link or the API, ends at the storage host.
	object := "/objects/" + strconv.FormatInt(fake.AssetID("acme", "murmur-artifacts", "v1.2.0", "grep-1.2.0.mur.zip"), 10)
	downloads := fake.Count(githubtest.Storage, object)
	if downloads != 1 {
		t.Fatalf("the first pull asked for the asset %d times", downloads)
	}
	second := newWorld(t)
	second.cas = first.cas
	p = second.puller()
	p.Source = githubSource(fake)
	res := second.mustPull(p, req(grep, "1.2.0"))
	if n := fake.Count(githubtest.Storage, object); n != downloads {
		t.Fatalf("the second pull downloaded the asset again (%d requests for it, then %d)", downloads, n)
	}
	if !res[0].CacheHit || res[0].Transferred != 0 || res[0].NewPin == nil {
		t.Fatalf("result %+v, want a cache hit that pins the owner", res[0])
	}
	if pin, ok := second.readLock().Pin("acme"); !ok || pin.OwnerID != 1234567 {
		t.Fatalf("the scope's owner is not pinned: %+v", pin)
	}
}

// endlessBlob answers blob GETs with an endless chunked body (no Content-Length), or with the
// given Content-Length and that many bytes, counting what it sent.
func endlessBlob(sent *atomic.Int64, contentLength int) registrytest.Fault {
	return func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		if !registrytest.IsBlob(r) {
			next.ServeHTTP(w, r)
			return
		}
		if contentLength > 0 {
			w.Header().Set("Content-Length", strconv.Itoa(contentLength))
		}
		w.WriteHeader(http.StatusOK)
		chunk := bytes.Repeat([]byte("A"), 64<<10)
		for sent.Load() < 1<<30 {
			if contentLength > 0 && sent.Load() >= int64(contentLength) {
				return
			}
			n, err := w.Write(chunk)
			sent.Add(int64(n))
			if err != nil {
				return
			}
		}
	}
}

// A body longer than the manifest declares stops at the first byte too many and keeps nothing.
func TestPullBodyBoundedByTheManifest(t *testing.T) {
	for _, c := range []struct {
		name          string
		contentLength int
	}{{"chunked and endless", 0}, {"lying Content-Length", 256 << 20}} {
		t.Run(c.name, func(t *testing.T) {
			f := registrytest.StartFaulty(t)
			st := faultyStore(t, f, ocistore.Options{Retries: -1})
			w := newWorld(t)
			before := w.seeded(st)
			p := pack(t, "grep", "1.0.0", 105)
			d := push(t, st, grep, "1.0.0", "any", p)
			var sent atomic.Int64
			f.Arm(endlessBlob(&sent, c.contentLength))
			_, err := w.pull(w.puller(st), req(grep, "1.0.0"))
			errtest.WantToken(t, err, errs.Integrity, f.Addr(), d.Digest.String(), strconv.FormatInt(d.Size, 10), "more")
			w.assertUnchanged(before)
			w.assertFailedRecord(grep, errs.Integrity)
			if sent.Load() >= 1<<30 {
				t.Fatalf("the pull read the whole endless body (%d bytes)", sent.Load())
			}
		})
	}
}

// lyingPayloads are packed artifacts whose zip directory reads but whose payload is not what the
// zip records; each must fail the pull before anything becomes visible.
func lyingPayloads(t *testing.T) map[string]packed {
	wasm := artifacttest.Module(64<<10, 106)
	crc := crc32.ChecksumIEEE(wasm)
	size := uint64(len(wasm))
	spec := artifacttest.Spec{Name: "grep", Version: "1.0.0", Wasm: wasm}
	return map[string]packed{
		"stored, wrong CRC":            {zip: spec.Lying(true, crc^1, size)},
		"stored, CRC zero":             {zip: spec.Lying(true, 0, size)},
		"deflated, wrong CRC":          {zip: spec.Lying(false, crc^1, size)},
		"deflated, CRC zero":           {zip: spec.Lying(false, 0, size)},
		"deflated, declared too small": {zip: spec.Lying(false, crc, size-100)},
		"deflated, declared too large": {zip: spec.Lying(false, crc, size+100)},
	}
}

// otherPlatformThan is a platform that is not host's, so that a pull for it stages nothing.
func otherPlatformThan(host string) string {
	if host == "linux-aarch64" {
		return "linux-x86_64"
	}
	return "linux-aarch64"
}

// Every payload check runs before the blob commits and before the lock is touched, whether the
// pull stages tools/ (this machine's platform) or not, from a file and through a layout store.
func TestPullChecksThePayloadBeforeCommitting(t *testing.T) {
	for name, bad := range lyingPayloads(t) {
		for _, plat := range []string{ref.HostPlatform(), otherPlatformThan(ref.HostPlatform())} {
			for _, via := range []string{"file", "layout"} {
				t.Run(name+"/"+plat+"/"+via, func(t *testing.T) {
					w := newWorld(t)
					layout := layoutStore(t)
					before := w.seeded(layout)
					var st store.Store = layout
					n := grep
					if via == "file" {
						path := filepath.Join(t.TempDir(), "grep-1.0.0.mur.zip")
						os.WriteFile(path, bad.zip, 0o644)
						fs, err := store.OpenFile(path)
						if err != nil {
							t.Fatal(err)
						}
						st, n = fs, fs.Descriptor().Name
					} else {
						push(t, layout, grep, "1.0.0", "any", bad)
					}
					p := w.puller(st)
					p.Platform = plat
					_, err := w.pull(p, fpull.Request{Asked: "x", Name: n, Version: "1.0.0"})
					errtest.WantToken(t, err, errs.InvalidArtifact, "capsule.wasm", "nothing was written")
					w.assertUnchanged(before)
					w.assertFailedRecord(n, errs.InvalidArtifact)
				})
			}
		}
	}
}

// The decompression ceiling holds before anything is written too.
func TestPullDecompressionCeiling(t *testing.T) {
	w := newWorld(t)
	st := layoutStore(t)
	before := w.seeded(st)
	push(t, st, grep, "1.0.0", "any", pack(t, "grep", "1.0.0", 107))
	t.Setenv(artifact.EnvMaxDecompressed, "1000")
	_, err := w.pull(w.puller(st), req(grep, "1.0.0"))
	errtest.WantToken(t, err, errs.InvalidArtifact, "1000", artifact.EnvMaxDecompressed)
	w.assertUnchanged(before)
}

// hookStore runs a hook when a payload is opened: another process acting mid-pull.
type hookStore struct {
	store.Store
	onOpen func()
}

func (h *hookStore) Open(ctx context.Context, n ref.Name, d digest.Digest) (io.ReadCloser, error) {
	h.onOpen()
	return h.Store.Open(ctx, n, d)
}

// The lock's checks run before the blob commits: a conflict that appears mid-pull leaves no blob.
func TestPullLockConflictLeavesNoBlob(t *testing.T) {
	w := newWorld(t)
	layout := layoutStore(t)
	w.seeded(layout)
	p := pack(t, "grep", "1.0.0", 108)
	push(t, layout, grep, "1.0.0", "any", p)
	other := digest.FromString("another process pinned other bytes")
	st := &hookStore{Store: layout, onOpen: func() {
		lock.Update(context.Background(), w.proj.LockPath(), func(l *lock.Lock) error {
			return l.Upsert("acme/grep", "1.0.0", "any", other.Encoded(), "operator", false)
		})
	}}
	_, err := w.pull(w.puller(st), req(grep, "1.0.0"))
	errtest.WantToken(t, err, errs.LockConflict, "acme/grep")
	if w.cas.Has(p.digest()) {
		t.Fatal("a pull that failed with lock-conflict left its blob in the CAS")
	}
	if e := w.readLock().Find("acme/grep"); e == nil || e.SHA256.Any != other.Encoded() {
		t.Fatalf("the other process's pin was changed: %+v", e)
	}
	if _, err := os.Stat(stage.StagedDir(w.proj.Tools(), grep)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("tools/acme/grep exists after a lock-conflict")
	}
	if st := w.state(); st.ingest != 0 {
		t.Fatalf("%d temporary files left", st.ingest)
	}
}

// fakeSource serves one packed artifact as a GitHub source would, with hooks.
type fakeSource struct {
	label    string
	owner    int64
	zip      []byte
	version  string
	calls    atomic.Int64
	midFetch func()
}

func (s *fakeSource) Label(scope string) (string, bool) { return s.label, true }

func (s *fakeSource) sourced(name ref.Name, pin *lock.ScopePin) (store.Sourced, error) {
	s.calls.Add(1)
	out := store.Sourced{
		Descriptor: store.Descriptor{Name: name, Version: s.version, Platform: "any", Digest: digest.FromBytes(s.zip), Size: int64(len(s.zip)), Origin: s.label},
		Release:    "v" + s.version, Asset: name.Name + ".mur.zip", OwnerID: s.owner, RepoID: 42,
	}
	if pin == nil {
		out.NewPin = &lock.ScopePin{Source: s.label, OwnerID: s.owner, RepoID: 42}
	} else if err := pin.CheckOwner(name.Scope, s.label, s.owner); err != nil {
		return store.Sourced{}, err
	}
	return out, nil
}

func (s *fakeSource) Resolve(ctx context.Context, name ref.Name, version, platform string, pin *lock.ScopePin) (store.Sourced, error) {
	return s.sourced(name, pin)
}

func (s *fakeSource) Fetch(ctx context.Context, name ref.Name, version, platform string, pin *lock.ScopePin, scratch store.Scratch) (store.Sourced, error) {
	out, err := s.sourced(name, pin)
	if err != nil {
		return out, err
	}
	scratch.Write(s.zip)
	if s.midFetch != nil {
		s.midFetch()
	}
	return out, nil
}

// Another process pins the scope to another owner while this pull downloads: the owner check
// made under the lock refuses, and nothing of this pull stays.
func TestPullOwnerPinnedMidPull(t *testing.T) {
	w := newWorld(t)
	src := &fakeSource{label: "github:acme/murmur-artifacts", owner: 1, version: "1.2.0", zip: githubtest.PackArtifact("grep", "1.2.0")}
	theirs := lock.ScopePin{Source: "github:acme/murmur-artifacts", OwnerID: 2, RepoID: 43}
	src.midFetch = func() {
		lock.Update(context.Background(), w.proj.LockPath(), func(l *lock.Lock) error { return l.SetPin("acme", theirs) })
	}
	p := w.puller()
	p.Source = src
	_, err := w.pull(p, req(grep, "1.2.0"))
	errtest.WantToken(t, err, errs.OwnerChanged, "acme", "1", "2")
	if w.cas.Has(digest.FromBytes(src.zip)) {
		t.Fatal("a pull refused for owner-changed left its blob")
	}
	l := w.readLock()
	if pin, _ := l.Pin("acme"); pin != theirs || l.Find("acme/grep") != nil {
		t.Fatalf("lock after the refusal: pin %+v, entries %+v", pin, l.Artifacts)
	}
	if _, err := os.Stat(w.proj.ToolsDir()); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("tools/ exists after a refused pull")
	}
}

// config.yaml moves a pinned scope to another repository: the pull refuses before asking it.
func TestPullOwnerCheckWhenTheConfigMovesAScope(t *testing.T) {
	w := newWorld(t)
	lock.Update(context.Background(), w.proj.LockPath(), func(l *lock.Lock) error {
		return l.SetPin("acme", lock.ScopePin{Source: "github:acme/murmur-artifacts", OwnerID: 1, RepoID: 42})
	})
	before := w.state()
	src := &fakeSource{label: "github:mallory/murmur-artifacts", owner: 1, version: "1.2.0", zip: githubtest.PackArtifact("grep", "1.2.0")}
	p := w.puller()
	p.Source = src
	_, err := w.pull(p, req(grep, "1.2.0"))
	errtest.WantToken(t, err, errs.OwnerChanged, "github:acme/murmur-artifacts", "github:mallory/murmur-artifacts", "forget-scope")
	if n := src.calls.Load(); n != 0 {
		t.Fatalf("the moved source was asked %d times", n)
	}
	w.assertUnchanged(before)
}

// A staged file left short (a crash while staging, which is not fsynced) is restaged by the next
// pull, a cache hit.
func TestPullRestagesAShortFile(t *testing.T) {
	w := newWorld(t)
	st := layoutStore(t)
	p := pack(t, "grep", "1.0.0", 109)
	push(t, st, grep, "1.0.0", "any", p)
	w.mustPull(w.puller(st), req(grep, "1.0.0"))
	staged := filepath.Join(stage.StagedDir(w.proj.Tools(), grep), "capsule.wasm")
	if err := os.Truncate(staged, int64(len(p.wasm)/2)); err != nil {
		t.Fatal(err)
	}
	res := w.mustPull(w.puller(st), req(grep, "1.0.0"))
	if !res[0].CacheHit {
		t.Fatalf("second pull %+v", res[0])
	}
	if b, _ := os.ReadFile(staged); !bytes.Equal(b, p.wasm) {
		t.Fatalf("the short staged file was not restaged: %d bytes, want %d", len(b), len(p.wasm))
	}
	if err := stage.CheckStaged(w.proj.Tools(), grep, p.digest()); err != nil {
		t.Fatal(err)
	}
}

// plantStaging makes a staging leftover in tools/acme/ and ages it past the grace.
func plantStaging(t *testing.T, proj fpull.Project, name string) string {
	t.Helper()
	dir := filepath.Join(proj.ToolsDir(), "acme", ".mur-tmp-"+name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "capsule.wasm"), make([]byte, 1<<20), 0o644)
	old := time.Now().Add(-time.Hour)
	os.Chtimes(dir, old, old)
	return dir
}

// Staging leftovers that no live process holds go at the next pull, and at gc.
func TestStagingLeftoversAreRemoved(t *testing.T) {
	w := newWorld(t)
	st := layoutStore(t)
	push(t, st, grep, "1.0.0", "any", pack(t, "grep", "1.0.0", 110))
	dead := plantStaging(t, w.proj, "grep-dead")
	live := plantStaging(t, w.proj, "grep-live")
	held, err := os.Open(live)
	if err != nil {
		t.Fatal(err)
	}
	if err := lockedfile.TryLock(held); err != nil {
		t.Fatal(err)
	}
	young := filepath.Join(w.proj.ToolsDir(), "acme", ".mur-tmp-grep-young")
	os.MkdirAll(young, 0o755)

	w.mustPull(w.puller(st), req(grep, "1.0.0"))
	if _, err := os.Stat(dead); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("the pull left a staging leftover no process holds")
	}
	for _, dir := range []string{live, young} {
		if _, err := os.Stat(dir); err != nil {
			t.Fatalf("the pull removed %s, which a live process may hold: %v", dir, err)
		}
	}
	held.Close()
	old := time.Now().Add(-time.Hour)
	os.Chtimes(young, old, old)
	dry, err := fetch.GC(context.Background(), fetch.GCInput{CAS: w.cas, Project: w.proj.Dir, OlderThan: -1, DryRun: true})
	if err != nil || len(dry.Staging) != 2 {
		t.Fatalf("gc --dry-run = %+v, %v; want both leftovers listed", dry.Staging, err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Fatal("a dry run removed a leftover")
	}
	rep, err := fetch.GC(context.Background(), fetch.GCInput{CAS: w.cas, OlderThan: -1})
	if err != nil || len(rep.Staging) != 2 {
		t.Fatalf("gc from outside the project (through its root) = %+v, %v", rep.Staging, err)
	}
	ents, _ := os.ReadDir(filepath.Join(w.proj.ToolsDir(), "acme"))
	if len(ents) != 2 { // grep/ and its lock file
		t.Fatalf("tools/acme holds %d entries after gc", len(ents))
	}
}

// A manifest whose name annotation names another artifact is refused before its payload is read:
// a store must not serve one tool's manifest as another's.
func TestPullManifestNamingAnotherArtifact(t *testing.T) {
	w := newWorld(t)
	dir := filepath.Join(t.TempDir(), "store")
	st := openStore(t, "oci-layout:"+dir, ocistore.Options{})
	before := w.seeded(st)
	other := ref.Name{Scope: "acme", Name: "other"}
	// The payload packs grep's own manifest, so only the annotation tells.
	push(t, st, other, "1.0.0", "any", pack(t, "grep", "1.0.0", 111))
	index := filepath.Join(dir, "index.json")
	b, err := os.ReadFile(index)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(index, bytes.Replace(b, []byte(`"acme/other:1.0.0"`), []byte(`"acme/grep:1.0.0"`), 1), 0o644)
	_, err = w.pull(w.puller(st), req(grep, "1.0.0"))
	errtest.WantToken(t, err, errs.Integrity, "dev.murmur.artifact.name", `"acme/other"`, `"acme/grep"`)
	w.assertUnchanged(before)
	w.assertFailedRecord(grep, errs.Integrity)
}

// GitHub owners are case-insensitive: with github:acme/tools pinned and github:Acme/tools
// configured, the pull accepts the source, and verify agrees with it instead of reporting a pin.
func TestPullAndVerifyAgreeOnTheOwnersCase(t *testing.T) {
	w := newWorld(t)
	lock.Update(context.Background(), w.proj.LockPath(), func(l *lock.Lock) error {
		return l.SetPin("acme", lock.ScopePin{Source: "github:acme/tools", OwnerID: 1, RepoID: 42})
	})
	src := &fakeSource{label: "github:Acme/tools", owner: 1, version: "1.2.0", zip: githubtest.PackArtifact("grep", "1.2.0")}
	p := w.puller()
	p.Source = src
	if _, err := w.pull(p, req(grep, "1.2.0")); err != nil {
		t.Fatalf("the pull refused a source that differs from the pin only in the owner's case: %v", err)
	}
	rep, err := fetch.Verify(context.Background(), fetch.VerifyInput{Project: w.proj, Lock: w.readLock(), CAS: w.cas,
		SourceFor: func(string) string { return src.label }})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 0 {
		t.Fatalf("verify disagrees with the pull: %+v", rep.Problems)
	}
}
