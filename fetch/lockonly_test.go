package fetch_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/fetch/config"
	"github.com/murmur-nexus/mur/fetch/github/githubtest"
	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/fetch/proxytest"
	"github.com/murmur-nexus/mur/fetch/publish"
	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/fetch/stage"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
	"github.com/murmur-nexus/mur/internal/manifest"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
)

// askCounter counts what a store is asked: Resolve reads metadata, Open reads a payload.
type askCounter struct {
	store.Store
	resolves, opens atomic.Int64
}

func (c *askCounter) Resolve(ctx context.Context, n ref.Name, version, platform string) (store.Descriptor, error) {
	c.resolves.Add(1)
	return c.Store.Resolve(ctx, n, version, platform)
}

func (c *askCounter) Open(ctx context.Context, n ref.Name, d digest.Digest) (io.ReadCloser, error) {
	c.opens.Add(1)
	return c.Store.Open(ctx, n, d)
}

func intentOf(t *testing.T, w *world, yaml string) fetch.Intent {
	t.Helper()
	path := filepath.Join(w.Proj.Dir, "murmur.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := manifest.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return fetch.Intent{Path: path, Capsule: c}
}

func declaredReqs(in fetch.Intent) []pull.Request {
	var out []pull.Request
	for _, a := range in.Capsule.Artifacts {
		out = append(out, pull.Request{Asked: a.Name.String() + "@" + a.Version, Name: a.Name, Version: a.Version})
	}
	return out
}

const lockYAML = "name: bot\nartifacts:\n  - name: acme/grep\n    version: latest\n"

// TestLockPinsFromMetadata: mur lock resolves latest (the newest release, not the newer
// pre-release) and pins it from a registry's manifest, a layout's index.json and a GitHub
// source's index, downloading no payload: no blob request, no asset download, nothing in the
// CAS, no tools/. A second run asks nothing at all, and --bump asks again.
func TestLockPinsFromMetadata(t *testing.T) {
	v1, v2, rc := pulltest.Pack(t, "grep", "1.1.0", 1), pulltest.Pack(t, "grep", "1.2.0", 2), pulltest.Pack(t, "grep", "2.0.0-rc.1", 3)
	for _, kind := range []string{"registry", "layout", "github"} {
		t.Run(kind, func(t *testing.T) {
			w := newWorld(t)
			in := intentOf(t, w, lockYAML)
			p := w.puller()
			var requests func() int
			var payloadRequests func() int
			var counted *askCounter
			var fake *githubtest.Server
			switch kind {
			case "registry", "layout":
				var st store.Store
				if kind == "registry" {
					reg := registrytest.Start(t)
					px := proxytest.Start(t, reg.Addr(), proxytest.Options{})
					st = pulltest.OpenStore(t, "oci://"+px.Addr()+"/murmur", ocistore.Options{})
					requests = func() int { return px.Requests("") }
					payloadRequests = func() int { return px.Requests("/v2/murmur/acme/grep/blobs/") }
				} else {
					st = pulltest.LayoutStore(t)
				}
				for _, a := range []struct {
					v string
					p pulltest.Packed
				}{{"1.1.0", v1}, {"1.2.0", v2}, {"2.0.0-rc.1", rc}} {
					pulltest.Push(t, st, grep, a.v, ref.PlatformAny, a.p)
				}
				counted = &askCounter{Store: st}
				p.Pipeline().Stores = []store.Store{counted}
				if requests == nil {
					requests = func() int { return int(counted.resolves.Load() + counted.opens.Load()) }
					payloadRequests = func() int { return int(counted.opens.Load()) }
				}
			case "github":
				fake = githubtest.New(t)
				fake.AddRepo("acme", "murmur-artifacts", 1234567, 7654321)
				var arts []githubtest.Artifact
				for _, a := range []struct {
					v string
					p pulltest.Packed
				}{{"1.1.0", v1}, {"1.2.0", v2}, {"2.0.0-rc.1", rc}} {
					arts = append(arts, githubtest.Artifact{Name: "acme/grep", Version: a.v, Release: "v" + a.v, Asset: "grep-" + a.v + ".mur.zip", Data: a.p.Zip})
				}
				fake.Publish("acme", "murmur-artifacts", "acme", arts...)
				fake.ResetRequests()
				p.Pipeline().Source = pulltest.GitHubSource(fake)
				requests = func() int { return len(fake.Requests()) }
				// The index is an asset too; every other asset is a payload. Storage answers by
				// asset id, so the web host's download links and the API's asset endpoint tell.
				payloadRequests = func() int {
					n := 0
					for _, r := range fake.Requests() {
						if strings.Contains(r.Path, ".mur.zip") {
							n++
						}
					}
					for _, v := range []string{"1.1.0", "1.2.0", "2.0.0-rc.1"} {
						id := strconv.FormatInt(fake.AssetID("acme", "murmur-artifacts", "v"+v, "grep-"+v+".mur.zip"), 10)
						for _, r := range fake.Requests() {
							if strings.HasSuffix(r.Path, "/"+id) {
								n++
							}
						}
					}
					return n
				}
			}
			before := w.State()
			base, basePayload := requests(), payloadRequests()
			rep, err := p.LockProject(context.Background(), w.Proj, in, declaredReqs(in), fetch.LockOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Changes) != 1 || rep.Changes[0].Action != fetch.LockPinned || rep.Changes[0].To != "1.2.0" || rep.Changes[0].Digest != v2.Digest().String() {
				t.Fatalf("changes: %+v", rep.Changes)
			}
			first := requests()
			t.Logf("%s: mur lock made %d requests", kind, first-base)
			if kind == "github" {
				for _, r := range fake.Requests() {
					t.Logf("  %s %s %s", r.Server, r.Method, r.Path)
				}
			}
			if n := payloadRequests() - basePayload; n != 0 {
				t.Fatalf("mur lock downloaded a payload (%d requests for it)", n)
			}
			after := w.State()
			if after.Blobs != before.Blobs || after.Tools != before.Tools {
				t.Fatalf("mur lock changed the CAS or tools/:\n%+v\n%+v", before, after)
			}
			l, err := lock.Read(w.Proj.LockPath())
			if err != nil {
				t.Fatal(err)
			}
			if e := l.Find("acme/grep"); e == nil || e.ResolvedVersion != "1.2.0" || e.SHA256.Any != v2.Digest().Encoded() {
				t.Fatalf("lock: %+v", e)
			}
			if kind == "github" {
				if pin, ok := l.Pin("acme"); !ok || pin.OwnerID != 1234567 {
					t.Fatalf("the scope's owner was not pinned: %+v", pin)
				}
			}
			// Again: latest is held at its pin, and nothing is asked.
			rep, err = p.LockProject(context.Background(), w.Proj, in, declaredReqs(in), fetch.LockOptions{})
			if err != nil || rep.Changed() || requests() != first {
				t.Fatalf("a second mur lock: %v, %+v, %d requests after %d", err, rep.Changes, requests(), first)
			}
			// The pull that follows checks the bytes against the pin, as always.
			if kind != "github" {
				res := w.mustPull(p, pulltest.Req(grep, "1.2.0"))
				if res[0].Digest != v2.Digest().String() {
					t.Fatalf("pull after lock: %+v", res[0])
				}
			}
		})
	}
}

// TestLockMovesAndDrops: an entry whose version changed moves, a latest entry moves only with
// --bump, a pin no entry declares is dropped with its tools/, and --dry-run writes nothing.
func TestLockMovesAndDrops(t *testing.T) {
	w := newWorld(t)
	st := pulltest.LayoutStore(t)
	sed := ref.Name{Scope: "acme", Name: "sed"}
	pulltest.Push(t, st, grep, "1.0.0", ref.PlatformAny, pulltest.Pack(t, "grep", "1.0.0", 1))
	pulltest.Push(t, st, grep, "1.1.0", ref.PlatformAny, pulltest.Pack(t, "grep", "1.1.0", 2))
	pulltest.Push(t, st, sed, "1.0.0", ref.PlatformAny, pulltest.Pack(t, "sed", "1.0.0", 3))
	pulltest.Push(t, st, pulltest.Seed, "1.0.0", ref.PlatformAny, pulltest.Pack(t, "seed", "1.0.0", 4))
	p := w.puller(st)
	p.Pipeline().Platform = "" // stage tools/, so that dropping it can be seen
	w.mustPull(p, pulltest.Req(grep, "1.0.0"), pulltest.Req(sed, "1.0.0"), pulltest.Req(pulltest.Seed, "1.0.0"))
	in := intentOf(t, w, "name: bot\nartifacts:\n  - { name: acme/grep, version: \"1.1.0\" }\n  - { name: acme/seed, version: latest }\n")

	lockBefore, _ := os.ReadFile(w.Proj.LockPath())
	rep, err := p.LockProject(context.Background(), w.Proj, in, declaredReqs(in), fetch.LockOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if lockAfter, _ := os.ReadFile(w.Proj.LockPath()); string(lockAfter) != string(lockBefore) {
		t.Fatal("--dry-run wrote murmur.lock")
	}
	got := map[string]string{}
	for _, c := range rep.Changes {
		got[c.Name] = c.Action + " " + c.From + ">" + c.To
	}
	want := map[string]string{"acme/grep": "moved 1.0.0>1.1.0", "acme/seed": "kept 1.0.0>1.0.0", "acme/sed": "removed 1.0.0>"}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("%s: %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
	if _, err := p.LockProject(context.Background(), w.Proj, in, declaredReqs(in), fetch.LockOptions{}); err != nil {
		t.Fatal(err)
	}
	l, _ := lock.Read(w.Proj.LockPath())
	if l.Find("acme/sed") != nil || l.Find("acme/grep").ResolvedVersion != "1.1.0" {
		t.Fatalf("lock after mur lock: %+v", l.Artifacts)
	}
	if _, err := os.Stat(stage.StagedDir(w.Proj.Tools(), sed)); err == nil {
		t.Fatal("tools/acme/sed stayed after its pin was dropped")
	}
	if ms := in.Mismatches(l, ""); len(ms) != 0 {
		t.Fatalf("still mismatched: %v", ms)
	}
	// --bump moves latest; a name murmur.yaml does not declare is refused.
	pulltest.Push(t, st, pulltest.Seed, "1.1.0", ref.PlatformAny, pulltest.Pack(t, "seed", "1.1.0", 5))
	rep, err = p.LockProject(context.Background(), w.Proj, in, []pull.Request{pulltest.Req(pulltest.Seed, ref.Latest)}, fetch.LockOptions{Args: true, Bump: true})
	if err != nil || rep.Changes[0].Action != fetch.LockMoved || rep.Changes[0].To != "1.1.0" {
		t.Fatalf("--bump: %v %+v", err, rep.Changes)
	}
	_, err = p.LockProject(context.Background(), w.Proj, in, []pull.Request{pulltest.Req(sed, "1.0.0")}, fetch.LockOptions{Args: true})
	errtest.WantToken(t, err, errs.Usage, "does not declare acme/sed", "mur add acme/sed")
}

// resolveHook is a fake source that runs midResolve once it has answered a Resolve: the moment
// between `mur lock` reading murmur.lock and writing it.
type resolveHook struct {
	*pulltest.FakeSource
	midResolve func()
}

func (s *resolveHook) Resolve(ctx context.Context, name ref.Name, version, platform string, pin *lock.ScopePin) (store.Sourced, error) {
	out, err := s.FakeSource.Resolve(ctx, name, version, platform, pin)
	if s.midResolve != nil {
		s.midResolve()
	}
	return out, err
}

// Another process pins the scope while `mur lock` resolves: the owner the source answered with
// is checked against that pin, under the lock, and another owner is refused with nothing written;
// the same owner pins as if nobody had raced.
func TestLockRechecksTheOwnerPinnedMeanwhile(t *testing.T) {
	for _, tt := range []struct {
		name   string
		theirs lock.ScopePin
		token  errs.Token
	}{
		{"another owner", lock.ScopePin{Source: "github:acme/murmur-artifacts", OwnerID: 2, RepoID: 43}, errs.OwnerChanged},
		{"the same owner", lock.ScopePin{Source: "github:acme/murmur-artifacts", OwnerID: 1, RepoID: 42}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			in := intentOf(t, w, "name: app\nartifacts:\n  - name: acme/grep\n    version: 1.2.0\n")
			src := &resolveHook{FakeSource: &pulltest.FakeSource{Source: "github:acme/murmur-artifacts", Owner: 1, Version: "1.2.0", Zip: githubtest.PackArtifact("grep", "1.2.0")}}
			src.midResolve = func() {
				err := lock.Update(context.Background(), w.Proj.LockPath(), func(l *lock.Lock) error { return l.SetPin("acme", tt.theirs) })
				if err != nil {
					t.Error(err)
				}
			}
			p := w.puller()
			p.Pipeline().Source = src
			_, err := p.LockProject(context.Background(), w.Proj, in, declaredReqs(in), fetch.LockOptions{})
			l := w.ReadLock()
			pin, _ := l.Pin("acme")
			if tt.token != "" {
				errtest.WantToken(t, err, tt.token, "acme", "1", "2")
				if pin != tt.theirs || l.Find("acme/grep") != nil {
					t.Fatalf("lock after the refusal: pin %+v, entries %+v", pin, l.Artifacts)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if pin != tt.theirs || l.Find("acme/grep") == nil || l.Find("acme/grep").ResolvedVersion != "1.2.0" {
				t.Fatalf("lock: pin %+v, entries %+v", pin, l.Artifacts)
			}
		})
	}
}

// mur lock records the provenance it verified from metadata, as a pull records it: the bundle,
// its kind and its signer, with the bundle kept in the CAS.
func TestLockRecordsTheProvenanceItVerified(t *testing.T) {
	ctx := context.Background()
	p, item, local, hint, pub := pulltest.SignedGrep(t, 91)
	st := pulltest.OpenStore(t, "oci-layout:"+filepath.Join(t.TempDir(), "layout"), ocistore.Options{})
	if err := publish.Push(ctx, st, item); err != nil {
		t.Fatal(err)
	}
	w := newWorld(t)
	in := intentOf(t, w, "name: app\nartifacts:\n  - name: acme/grep\n    version: 1.2.0\n")
	pl := w.puller(st)
	pl.Pipeline().Provenance.Verifier = local
	pl.Pipeline().Provenance.Policy = func(string) config.ProvenancePolicy {
		return config.ProvenancePolicy{Mode: config.ProvenanceRequire, Trust: provenance.Trust{Keys: []provenance.TrustedKey{{Hint: hint, PEM: pub}}}}
	}
	if _, err := pl.LockProject(ctx, w.Proj, in, declaredReqs(in), fetch.LockOptions{}); err != nil {
		t.Fatal(err)
	}
	bd := digest.FromBytes(item.Bundles[0])
	e := w.ReadLock().Find("acme/grep")
	if e == nil || e.Provenance == nil || *e.Provenance != (lock.Provenance{Kind: lock.ProvenanceKey, Bundle: bd.String(), Signer: hint}) {
		t.Fatalf("entry %+v", e)
	}
	if !w.CAS.Has(bd) || w.CAS.Has(p.Digest()) {
		t.Fatalf("the CAS after mur lock: bundle %v, payload %v (want the bundle only)", w.CAS.Has(bd), w.CAS.Has(p.Digest()))
	}
}

// An entry that pins per platform gets a store's "any" payload under the platform locked for,
// as a pull pins it, so that the other platforms' pins keep their meaning.
func TestLockPinsAnyPayloadPerPlatform(t *testing.T) {
	st := pulltest.LayoutStore(t)
	anyP, arm := pulltest.Pack(t, "grep", "1.2.0", 92), pulltest.Pack(t, "grep", "1.2.0", 93)
	pulltest.Push(t, st, grep, "1.2.0", "any", anyP)
	w := newWorld(t)
	w.PinAll([]pulltest.Pin{{Name: "acme/grep", Version: "1.2.0", Platform: "linux-aarch64", Blob: arm.Zip}})
	in := intentOf(t, w, "name: app\nartifacts:\n  - name: acme/grep\n    version: 1.2.0\n")
	if _, err := w.puller(st).LockProject(context.Background(), w.Proj, in, declaredReqs(in), fetch.LockOptions{}); err != nil {
		t.Fatal(err)
	}
	e := w.ReadLock().Find("acme/grep")
	want := map[string]string{"linux-aarch64": arm.Digest().Encoded(), "linux-x86_64": anyP.Digest().Encoded()}
	if e.SHA256.Any != "" || fmt.Sprint(e.SHA256.Platforms) != fmt.Sprint(want) {
		t.Fatalf("entry %+v; want platforms %v", e.SHA256, want)
	}
}
