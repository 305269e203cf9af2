package pull_test

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

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/fetch/github/githubtest"
	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/fetch/stage"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/artifact"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
)

// latest resolves to the highest version the store holds, and the packed manifest is checked
// against that version, not against the word "latest".
func TestPullLatestFromStores(t *testing.T) {
	t.Parallel()
	f := registrytest.StartFaulty(t)
	for name, st := range map[string]store.Store{"layout": pulltest.LayoutStore(t), "registry": pulltest.FaultyStore(t, f, ocistore.Options{})} {
		t.Run(name, func(t *testing.T) {
			w := pulltest.NewWorld(t)
			// Semantic-version order, not the order of strings: 1.10.0 is the highest.
			pulltest.Push(t, st, grep, "1.9.0", "any", pulltest.Pack(t, "grep", "1.9.0", 101))
			v2 := pulltest.Pack(t, "grep", "1.10.0", 102)
			pulltest.Push(t, st, grep, "1.10.0", "any", v2)
			pulltest.Push(t, st, grep, "1.10.0-rc.1", "any", pulltest.Pack(t, "grep", "1.10.0-rc.1", 103))
			res := w.MustPull(w.Puller(st), pull.Request{Asked: "acme/grep", Name: grep, Version: ref.Latest})
			if got := res[0]; got.Version != "1.10.0" || got.Digest != v2.Digest().String() {
				t.Fatalf("latest resolved to %s %s, want 1.10.0 %s", got.Version, got.Digest, v2.Digest())
			}
			if e := w.ReadLock().Find("acme/grep"); e == nil || e.ResolvedVersion != "1.10.0" || e.SHA256.Any != v2.Digest().Encoded() {
				t.Fatalf("lock entry %+v", e)
			}
			if rs := w.Records(); rs[len(rs)-1].Version != "1.10.0" || rs[len(rs)-1].Ref != "acme/grep" {
				t.Fatalf("record %+v", rs[len(rs)-1])
			}
		})
	}
}

// Two projects on one home: the second resolves to a digest the CAS holds and downloads nothing.
func TestPullReusesTheCASAcrossProjects(t *testing.T) {
	t.Parallel()
	st := &pulltest.OpenCounter{Store: pulltest.LayoutStore(t)}
	p := pulltest.Pack(t, "grep", "1.0.0", 104)
	pulltest.Push(t, st, grep, "1.0.0", "any", p)
	first := pulltest.NewWorld(t)
	first.MustPull(first.Puller(st), pulltest.Req(grep, "1.0.0"))
	if st.Opens.Load() != 1 {
		t.Fatalf("the first pull opened %d payloads", st.Opens.Load())
	}
	second := pulltest.NewWorld(t)
	second.CAS = first.CAS
	res := second.MustPull(second.Puller(st), pull.Request{Asked: "acme/grep", Name: grep, Version: ref.Latest})
	if st.Opens.Load() != 1 {
		t.Fatalf("the second project's pull downloaded the blob the CAS holds (%d opens)", st.Opens.Load())
	}
	if got := res[0]; !got.CacheHit || got.Transferred != 0 || got.Digest != p.Digest().String() || got.Version != "1.0.0" || got.Origin != "cas" {
		t.Fatalf("result %+v, want a cache hit of 1.0.0", got)
	}
	if e := second.ReadLock().Find("acme/grep"); e == nil || e.SHA256.Any != p.Digest().Encoded() {
		t.Fatalf("the second project's lock %+v", e)
	}
	if err := stage.CheckStaged(second.Proj.Tools(), grep, p.Digest()); err != nil {
		t.Fatalf("the second project's tools/: %v", err)
	}
	rs := second.Records()
	if r := rs[len(rs)-1]; r.Outcome != cas.OutcomeCacheHit || r.Transferred != 0 || r.Digest != p.Digest() {
		t.Fatalf("record %+v, want a cache hit with 0 bytes transferred", r)
	}
}

// The same through a source: the index names a digest the CAS holds, and no asset is downloaded;
// the scope's owner is still pinned.
func TestPullReusesTheCASFromASource(t *testing.T) {
	t.Parallel()
	fake := githubtest.New(t)
	fake.AddRepo("acme", "murmur-artifacts", 1234567, 7654321)
	a := githubtest.Artifact{Name: "acme/grep", Version: "1.2.0", Release: "v1.2.0", Asset: "grep-1.2.0.mur.zip", Data: githubtest.PackArtifact("grep", "1.2.0")}
	fake.Publish("acme", "murmur-artifacts", "acme", a)
	first := pulltest.NewWorld(t)
	p := first.Puller()
	p.Source = pulltest.GitHubSource(fake)
	first.MustPull(p, pulltest.Req(grep, "1.2.0"))
	// Every download of the asset, through its link or the API, ends at the storage host.
	object := "/objects/" + strconv.FormatInt(fake.AssetID("acme", "murmur-artifacts", "v1.2.0", "grep-1.2.0.mur.zip"), 10)
	downloads := fake.Count(githubtest.Storage, object)
	if downloads != 1 {
		t.Fatalf("the first pull asked for the asset %d times", downloads)
	}
	second := pulltest.NewWorld(t)
	second.CAS = first.CAS
	p = second.Puller()
	p.Source = pulltest.GitHubSource(fake)
	res := second.MustPull(p, pulltest.Req(grep, "1.2.0"))
	if n := fake.Count(githubtest.Storage, object); n != downloads {
		t.Fatalf("the second pull downloaded the asset again (%d requests for it, then %d)", downloads, n)
	}
	if !res[0].CacheHit || res[0].Transferred != 0 || res[0].NewPin == nil {
		t.Fatalf("result %+v, want a cache hit that pins the owner", res[0])
	}
	if pin, ok := second.ReadLock().Pin("acme"); !ok || pin.OwnerID != 1234567 {
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
	t.Parallel()
	for _, c := range []struct {
		name          string
		contentLength int
	}{{"chunked and endless", 0}, {"lying Content-Length", 256 << 20}} {
		t.Run(c.name, func(t *testing.T) {
			f := registrytest.StartFaulty(t)
			st := pulltest.FaultyStore(t, f, ocistore.Options{Retries: -1})
			w := pulltest.NewWorld(t)
			before := w.Seeded(st)
			p := pulltest.Pack(t, "grep", "1.0.0", 105)
			d := pulltest.Push(t, st, grep, "1.0.0", "any", p)
			var sent atomic.Int64
			f.Arm(endlessBlob(&sent, c.contentLength))
			_, err := w.Pull(w.Puller(st), pulltest.Req(grep, "1.0.0"))
			errtest.WantToken(t, err, errs.Integrity, f.Addr(), d.Digest.String(), strconv.FormatInt(d.Size, 10), "more")
			w.AssertUnchanged(before)
			w.AssertFailedRecord(grep, errs.Integrity)
			if sent.Load() >= 1<<30 {
				t.Fatalf("the pull read the whole endless body (%d bytes)", sent.Load())
			}
		})
	}
}

// lyingPayloads are packed artifacts whose zip directory reads but whose payload is not what the
// zip records; each must fail the pull before anything becomes visible.
func lyingPayloads(t *testing.T) map[string]pulltest.Packed {
	wasm := artifacttest.Module(64<<10, 106)
	crc := crc32.ChecksumIEEE(wasm)
	size := uint64(len(wasm))
	spec := artifacttest.Spec{Name: "grep", Version: "1.0.0", Wasm: wasm}
	return map[string]pulltest.Packed{
		"stored, wrong CRC":            {Zip: spec.Lying(true, crc^1, size)},
		"stored, CRC zero":             {Zip: spec.Lying(true, 0, size)},
		"deflated, wrong CRC":          {Zip: spec.Lying(false, crc^1, size)},
		"deflated, CRC zero":           {Zip: spec.Lying(false, 0, size)},
		"deflated, declared too small": {Zip: spec.Lying(false, crc, size-100)},
		"deflated, declared too large": {Zip: spec.Lying(false, crc, size+100)},
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
	t.Parallel()
	for name, bad := range lyingPayloads(t) {
		for _, plat := range []string{ref.HostPlatform(), otherPlatformThan(ref.HostPlatform())} {
			for _, via := range []string{"file", "layout"} {
				t.Run(name+"/"+plat+"/"+via, func(t *testing.T) {
					w := pulltest.NewWorld(t)
					layout := pulltest.LayoutStore(t)
					before := w.Seeded(layout)
					var st store.Store = layout
					n := grep
					if via == "file" {
						path := filepath.Join(t.TempDir(), "grep-1.0.0.mur.zip")
						os.WriteFile(path, bad.Zip, 0o644)
						fs, err := store.OpenFile(path)
						if err != nil {
							t.Fatal(err)
						}
						st, n = fs, fs.Descriptor().Name
					} else {
						pulltest.Push(t, layout, grep, "1.0.0", "any", bad)
					}
					p := w.Puller(st)
					p.Platform = plat
					_, err := w.Pull(p, pull.Request{Asked: "x", Name: n, Version: "1.0.0"})
					errtest.WantToken(t, err, errs.InvalidArtifact, "capsule.wasm", "nothing was written")
					w.AssertUnchanged(before)
					w.AssertFailedRecord(n, errs.InvalidArtifact)
				})
			}
		}
	}
}

// The decompression ceiling holds before anything is written too.
func TestPullDecompressionCeiling(t *testing.T) {
	w := pulltest.NewWorld(t)
	st := pulltest.LayoutStore(t)
	before := w.Seeded(st)
	pulltest.Push(t, st, grep, "1.0.0", "any", pulltest.Pack(t, "grep", "1.0.0", 107))
	t.Setenv(artifact.EnvMaxDecompressed, "1000")
	_, err := w.Pull(w.Puller(st), pulltest.Req(grep, "1.0.0"))
	errtest.WantToken(t, err, errs.InvalidArtifact, "1000", artifact.EnvMaxDecompressed)
	w.AssertUnchanged(before)
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
	t.Parallel()
	w := pulltest.NewWorld(t)
	layout := pulltest.LayoutStore(t)
	w.Seeded(layout)
	p := pulltest.Pack(t, "grep", "1.0.0", 108)
	pulltest.Push(t, layout, grep, "1.0.0", "any", p)
	other := digest.FromString("another process pinned other bytes")
	st := &hookStore{Store: layout, onOpen: func() {
		lock.Update(context.Background(), w.Proj.LockPath(), func(l *lock.Lock) error {
			return l.Upsert("acme/grep", "1.0.0", "any", other.Encoded(), "operator", false)
		})
	}}
	_, err := w.Pull(w.Puller(st), pulltest.Req(grep, "1.0.0"))
	errtest.WantToken(t, err, errs.LockConflict, "acme/grep")
	if w.CAS.Has(p.Digest()) {
		t.Fatal("a pull that failed with lock-conflict left its blob in the CAS")
	}
	if e := w.ReadLock().Find("acme/grep"); e == nil || e.SHA256.Any != other.Encoded() {
		t.Fatalf("the other process's pin was changed: %+v", e)
	}
	if _, err := os.Stat(stage.StagedDir(w.Proj.Tools(), grep)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("tools/acme/grep exists after a lock-conflict")
	}
	if st := w.State(); st.Ingest != 0 {
		t.Fatalf("%d temporary files left", st.Ingest)
	}
}

// Another process pins the scope to another owner while this pull downloads: the owner check
// made under the lock refuses, and nothing of this pull stays.
func TestPullOwnerPinnedMidPull(t *testing.T) {
	t.Parallel()
	w := pulltest.NewWorld(t)
	src := &pulltest.FakeSource{Source: "github:acme/murmur-artifacts", Owner: 1, Version: "1.2.0", Zip: githubtest.PackArtifact("grep", "1.2.0")}
	theirs := lock.ScopePin{Source: "github:acme/murmur-artifacts", OwnerID: 2, RepoID: 43}
	src.MidFetch = func() {
		lock.Update(context.Background(), w.Proj.LockPath(), func(l *lock.Lock) error { return l.SetPin("acme", theirs) })
	}
	p := w.Puller()
	p.Source = src
	_, err := w.Pull(p, pulltest.Req(grep, "1.2.0"))
	errtest.WantToken(t, err, errs.OwnerChanged, "acme", "1", "2")
	if w.CAS.Has(digest.FromBytes(src.Zip)) {
		t.Fatal("a pull refused for owner-changed left its blob")
	}
	l := w.ReadLock()
	if pin, _ := l.Pin("acme"); pin != theirs || l.Find("acme/grep") != nil {
		t.Fatalf("lock after the refusal: pin %+v, entries %+v", pin, l.Artifacts)
	}
	if _, err := os.Stat(w.Proj.ToolsDir()); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("tools/ exists after a refused pull")
	}
}

// config.yaml moves a pinned scope to another repository: the pull refuses before asking it.
func TestPullOwnerCheckWhenTheConfigMovesAScope(t *testing.T) {
	t.Parallel()
	w := pulltest.NewWorld(t)
	lock.Update(context.Background(), w.Proj.LockPath(), func(l *lock.Lock) error {
		return l.SetPin("acme", lock.ScopePin{Source: "github:acme/murmur-artifacts", OwnerID: 1, RepoID: 42})
	})
	before := w.State()
	src := &pulltest.FakeSource{Source: "github:mallory/murmur-artifacts", Owner: 1, Version: "1.2.0", Zip: githubtest.PackArtifact("grep", "1.2.0")}
	p := w.Puller()
	p.Source = src
	_, err := w.Pull(p, pulltest.Req(grep, "1.2.0"))
	errtest.WantToken(t, err, errs.OwnerChanged, "github:acme/murmur-artifacts", "github:mallory/murmur-artifacts", "forget-scope")
	if n := src.Calls.Load(); n != 0 {
		t.Fatalf("the moved source was asked %d times", n)
	}
	w.AssertUnchanged(before)
}

// A staged file left short (a crash while staging, which is not fsynced) is restaged by the next
// pull, a cache hit.
func TestPullRestagesAShortFile(t *testing.T) {
	t.Parallel()
	w := pulltest.NewWorld(t)
	st := pulltest.LayoutStore(t)
	p := pulltest.Pack(t, "grep", "1.0.0", 109)
	pulltest.Push(t, st, grep, "1.0.0", "any", p)
	w.MustPull(w.Puller(st), pulltest.Req(grep, "1.0.0"))
	staged := filepath.Join(stage.StagedDir(w.Proj.Tools(), grep), "capsule.wasm")
	if err := os.Truncate(staged, int64(len(p.Wasm)/2)); err != nil {
		t.Fatal(err)
	}
	res := w.MustPull(w.Puller(st), pulltest.Req(grep, "1.0.0"))
	if !res[0].CacheHit {
		t.Fatalf("second pull %+v", res[0])
	}
	if b, _ := os.ReadFile(staged); !bytes.Equal(b, p.Wasm) {
		t.Fatalf("the short staged file was not restaged: %d bytes, want %d", len(b), len(p.Wasm))
	}
	if err := stage.CheckStaged(w.Proj.Tools(), grep, p.Digest()); err != nil {
		t.Fatal(err)
	}
}

// A manifest whose name annotation names another artifact is refused before its payload is read:
// a store must not serve one tool's manifest as another's.
func TestPullManifestNamingAnotherArtifact(t *testing.T) {
	t.Parallel()
	w := pulltest.NewWorld(t)
	dir := filepath.Join(t.TempDir(), "store")
	st := pulltest.OpenStore(t, "oci-layout:"+dir, ocistore.Options{})
	before := w.Seeded(st)
	other := ref.Name{Scope: "acme", Name: "other"}
	// The payload packs grep's own manifest, so only the annotation tells.
	pulltest.Push(t, st, other, "1.0.0", "any", pulltest.Pack(t, "grep", "1.0.0", 111))
	index := filepath.Join(dir, "index.json")
	b, err := os.ReadFile(index)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(index, bytes.Replace(b, []byte(`"acme/other:1.0.0"`), []byte(`"acme/grep:1.0.0"`), 1), 0o644)
	_, err = w.Pull(w.Puller(st), pulltest.Req(grep, "1.0.0"))
	errtest.WantToken(t, err, errs.Integrity, "dev.murmur.artifact.name", `"acme/other"`, `"acme/grep"`)
	w.AssertUnchanged(before)
	w.AssertFailedRecord(grep, errs.Integrity)
}
