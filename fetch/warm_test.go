package fetch_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/fetch/stage"
	fstore "github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
)

// newPinnedWorld is a project whose murmur.lock already pins pins, with an empty CAS.
func newPinnedWorld(t *testing.T, pins []pulltest.Pin) *world {
	t.Helper()
	w := newWorld(t)
	w.PinAll(pins)
	return w
}

func (w *world) warmInput(stores ...fstore.Store) fetch.WarmInput {
	return fetch.WarmInput{Project: w.Proj, Lock: w.ReadLock(), Puller: fetch.NewPuller(&pull.Puller{CAS: w.CAS, Stores: stores})}
}

// compiles counts Precompile calls by payload.
type compiles map[string]int

func (c compiles) fn(ctx context.Context, wasm []byte) error {
	c[string(wasm)]++
	return nil
}

func twoArtifacts(t *testing.T) []pulltest.Pin {
	return []pulltest.Pin{
		{Name: "acme/one", Version: "1.0.0", Platform: ref.PlatformAny, Blob: pulltest.ZipOf("one", "1.0.0", "")},
		{Name: "acme/two", Version: "2.0.0", Platform: ref.PlatformAny, Blob: pulltest.ZipOf("two", "2.0.0", "")},
	}
}

func TestRunFetchesThenCaches(t *testing.T) {
	pins := twoArtifacts(t)
	store := pulltest.OpenStore(t, "oci-layout:"+filepath.Join(t.TempDir(), "store"), ocistore.Options{})
	for _, p := range pins {
		pulltest.PushPin(t, store, p)
	}
	m := newPinnedWorld(t, pins)
	lockBefore, _ := os.ReadFile(m.Proj.LockPath())
	ctx := context.Background()
	calls := compiles{}
	in := m.warmInput(store)
	in.Precompile = calls.fn

	rep, err := fetch.Warm(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	size := int64(len(pins[0].Blob) + len(pins[1].Blob))
	if rep.Artifacts != 2 || rep.Fetched != 2 || rep.Cached != 0 || rep.Bytes != size || rep.Compiled != 2 || len(rep.Results) != 2 {
		t.Fatalf("first warm: %+v", rep)
	}
	for _, r := range rep.Results {
		if r.Origin != store.String() || r.CacheHit {
			t.Errorf("result %+v, want fetched from %s", r, store)
		}
	}
	for _, p := range pins {
		if !m.CAS.Has(p.Digest()) {
			t.Errorf("%s is not in the CAS", p.Name)
		}
		n, _ := ref.ParseName(p.Name)
		if err := stage.CheckStaged(m.Proj.Tools(), n, p.Digest()); err != nil {
			t.Errorf("tools/ of %s: %v", p.Name, err)
		}
		if calls[string(artifacttest.Tagged(n.Name))] != 1 {
			t.Errorf("%s was precompiled %d times, want once", p.Name, calls[string(artifacttest.Tagged(n.Name))])
		}
	}
	if len(calls) != 2 {
		t.Errorf("precompiled %d distinct payloads, want 2", len(calls))
	}

	rep, err = fetch.Warm(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Artifacts != 2 || rep.Fetched != 0 || rep.Cached != 2 || rep.Bytes != 0 || rep.Compiled != 2 {
		t.Fatalf("second warm: %+v", rep)
	}
	// Warm compiles cache hits too: a cache copied from another machine has no compiled forms.
	for _, p := range pins {
		n, _ := ref.ParseName(p.Name)
		if calls[string(artifacttest.Tagged(n.Name))] != 2 {
			t.Errorf("%s was precompiled %d times over two warms, want twice", p.Name, calls[string(artifacttest.Tagged(n.Name))])
		}
	}
	if lockAfter, _ := os.ReadFile(m.Proj.LockPath()); !bytes.Equal(lockAfter, lockBefore) {
		t.Errorf("warming changed murmur.lock:\n%s\n---\n%s", lockBefore, lockAfter)
	}
}

func TestRunPrecompileFailure(t *testing.T) {
	pins := twoArtifacts(t)[:1]
	store := pulltest.OpenStore(t, "oci-layout:"+filepath.Join(t.TempDir(), "store"), ocistore.Options{})
	pulltest.PushPin(t, store, pins[0])
	m := newPinnedWorld(t, pins)
	in := m.warmInput(store)
	in.Precompile = func(context.Context, []byte) error { return errors.New("memory minimum over the cap") }
	_, err := fetch.Warm(context.Background(), in)
	if !errors.Is(err, errs.InvalidArtifact) || !strings.Contains(err.Error(), "acme/one@1.0.0") || !strings.Contains(err.Error(), "memory minimum") {
		t.Fatalf("a payload that can't compile: %v", err)
	}
	if !m.CAS.Has(pins[0].Digest()) {
		t.Error("the pulled blob is gone after a compile failure")
	}
}

func TestRunLayoutServesAnotherMachine(t *testing.T) {
	pins := twoArtifacts(t)
	store := pulltest.OpenStore(t, "oci-layout:"+filepath.Join(t.TempDir(), "store"), ocistore.Options{})
	for _, p := range pins {
		pulltest.PushPin(t, store, p)
	}
	ctx := context.Background()
	m := newPinnedWorld(t, pins)
	in := m.warmInput(store)
	mirror := pulltest.OpenStore(t, "oci-layout:"+filepath.Join(t.TempDir(), "mirror"), ocistore.Options{})
	in.Layout = mirror
	if _, err := fetch.Warm(ctx, in); err != nil {
		t.Fatal(err)
	}
	// Again, from a warm cache: the mirror already holds everything, and pushing it is a no-op.
	if _, err := fetch.Warm(ctx, in); err != nil {
		t.Fatal(err)
	}

	m2 := newPinnedWorld(t, pins)
	rep, err := fetch.Warm(ctx, m2.warmInput(mirror))
	if err != nil {
		t.Fatalf("the mirror does not serve another machine: %v", err)
	}
	if rep.Fetched != 2 {
		t.Fatalf("from the mirror: %+v", rep)
	}
	for _, r := range rep.Results {
		if r.Origin != mirror.String() {
			t.Errorf("%s came from %s, want %s", r.Name, r.Origin, mirror)
		}
	}
	for _, p := range pins {
		if !m2.CAS.Has(p.Digest()) {
			t.Errorf("%s is not in the second machine's CAS", p.Name)
		}
	}
}

func otherPlatform(t *testing.T) (host, other string) {
	host = ref.HostPlatform()
	if host == ref.PlatformAny {
		t.Skip("this machine has no platform tag")
	}
	other = "darwin-aarch64"
	if host == other {
		other = "linux-x86_64"
	}
	return host, other
}

func TestRunAllPlatforms(t *testing.T) {
	host, other := otherPlatform(t)
	pins := []pulltest.Pin{
		{Name: "acme/one", Version: "1.0.0", Platform: ref.PlatformAny, Blob: pulltest.ZipOf("one", "1.0.0", "")},
		{Name: "acme/multi", Version: "3.0.0", Platform: host, Blob: pulltest.ZipOf("multi", "3.0.0", "for "+host)},
		{Name: "acme/multi", Version: "3.0.0", Platform: other, Blob: pulltest.ZipOf("multi", "3.0.0", "for "+other)},
	}
	store := pulltest.OpenStore(t, "oci-layout:"+filepath.Join(t.TempDir(), "store"), ocistore.Options{})
	for _, p := range pins {
		pulltest.PushPin(t, store, p)
	}
	m := newPinnedWorld(t, pins)
	ctx := context.Background()
	calls := compiles{}
	in := m.warmInput(store)
	in.Precompile = calls.fn

	// This machine's platform alone.
	rep, err := fetch.Warm(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Artifacts != 2 || rep.Fetched != 2 || m.CAS.Has(pins[2].Digest()) {
		t.Fatalf("host warm: %+v", rep)
	}

	in.Platform = "all"
	rep, err = fetch.Warm(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	// Each pinned blob once: the "any" pin is not warmed again for every platform.
	if rep.Artifacts != 3 || rep.Fetched != 1 || rep.Cached != 2 || len(rep.Results) != 3 || rep.Compiled != 2 {
		t.Fatalf("warm --platform all: %+v", rep)
	}
	for _, p := range pins {
		if !m.CAS.Has(p.Digest()) {
			t.Errorf("%s for %s is not in the CAS", p.Name, p.Platform)
		}
	}
	if calls[string(artifacttest.Tagged("one"))] != 2 || calls[string(artifacttest.Tagged("multi"))] != 2 {
		t.Errorf("precompile calls %v: want each payload this machine runs compiled once per warm", calls)
	}
	// tools/ still holds this machine's build.
	n, _ := ref.ParseName("acme/multi")
	if err := stage.CheckStaged(m.Proj.Tools(), n, pins[1].Digest()); err != nil {
		t.Errorf("after warming every platform: %v", err)
	}

	// One named platform.
	in.Platform = other
	rep, err = fetch.Warm(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Artifacts != 2 || rep.Cached != 2 || len(rep.Results) != 2 {
		t.Fatalf("warm --platform %s: %+v", other, rep)
	}
}

func TestRunUnservedPlatform(t *testing.T) {
	host, other := otherPlatform(t)
	pins := []pulltest.Pin{
		{Name: "acme/one", Version: "1.0.0", Platform: ref.PlatformAny, Blob: pulltest.ZipOf("one", "1.0.0", "")},
		{Name: "acme/multi", Version: "3.0.0", Platform: host, Blob: pulltest.ZipOf("multi", "3.0.0", "for "+host)},
		{Name: "acme/multi", Version: "3.0.0", Platform: other, Blob: pulltest.ZipOf("multi", "3.0.0", "for "+other)},
	}
	store := pulltest.OpenStore(t, "oci-layout:"+filepath.Join(t.TempDir(), "store"), ocistore.Options{})
	pulltest.PushPin(t, store, pins[0])
	pulltest.PushPin(t, store, pins[1]) // nobody serves the other platform's build
	m := newPinnedWorld(t, pins)
	lockBefore, _ := os.ReadFile(m.Proj.LockPath())
	in := m.warmInput(store)
	in.Platform = "all"
	rep, err := fetch.Warm(context.Background(), in)
	if !errors.Is(err, errs.NotFound) {
		t.Fatalf("want a not-found error, got %v", err)
	}
	if !strings.Contains(err.Error(), "acme/multi") {
		t.Errorf("the error does not name the artifact: %v", err)
	}
	if rep == nil {
		t.Fatal("no report with the error")
	}
	// What was warmed before the failure stays warm.
	if !m.CAS.Has(pins[0].Digest()) || rep.Artifacts < 1 {
		t.Errorf("acme/one was not kept warm: %+v", rep)
	}
	if m.CAS.Has(pins[2].Digest()) {
		t.Error("the unserved blob is in the CAS")
	}
	if lockAfter, _ := os.ReadFile(m.Proj.LockPath()); !bytes.Equal(lockAfter, lockBefore) {
		t.Errorf("a failed warm changed murmur.lock")
	}
}

func TestRunFrom(t *testing.T) {
	pins := twoArtifacts(t)[:1]
	store := pulltest.OpenStore(t, "oci-layout:"+filepath.Join(t.TempDir(), "store"), ocistore.Options{})
	pulltest.PushPin(t, store, pins[0])
	m := newPinnedWorld(t, pins)
	in := m.warmInput(store)
	var asked []string
	in.From = func(name string) ([]string, error) {
		asked = append(asked, name)
		return []string{pull.FromSources}, nil
	}
	rep, err := fetch.Warm(context.Background(), in)
	if !errors.Is(err, errs.NotFound) || !strings.Contains(err.Error(), "acme/one") {
		t.Fatalf("sources only, and no source: %v", err)
	}
	if len(asked) != 1 || asked[0] != "acme/one" {
		t.Errorf("From was asked about %v", asked)
	}
	if rep.Artifacts != 0 || m.CAS.Has(pins[0].Digest()) {
		t.Errorf("the store was used although install.from excludes stores: %+v", rep)
	}

	boom := errs.New(errs.NotGranted, "--from stores is not granted")
	in.From = func(string) ([]string, error) { return nil, boom }
	if _, err := fetch.Warm(context.Background(), in); !errors.Is(err, boom) {
		t.Fatalf("From's error: %v", err)
	}

	in.From = func(string) ([]string, error) { return []string{pull.FromStores}, nil }
	if rep, err := fetch.Warm(context.Background(), in); err != nil || rep.Fetched != 1 {
		t.Fatalf("stores only: %v %+v", err, rep)
	}
}

func TestRunOfflineCold(t *testing.T) {
	pins := twoArtifacts(t)
	store := pulltest.OpenStore(t, "oci-layout:"+filepath.Join(t.TempDir(), "store"), ocistore.Options{})
	for _, p := range pins {
		pulltest.PushPin(t, store, p)
	}
	m := newPinnedWorld(t, pins)
	in := m.warmInput(pulltest.Networked(store))
	in.Puller.Pipeline().Offline = true
	_, err := fetch.Warm(context.Background(), in)
	if !errors.Is(err, errs.Offline) || !strings.Contains(err.Error(), "mur warm") {
		t.Fatalf("offline with a cold cache: %v", err)
	}
	for _, p := range pins {
		if m.CAS.Has(p.Digest()) {
			t.Errorf("%s was fetched offline", p.Name)
		}
	}
}

// Warming every platform writes each one through, into one index.
func TestWriteThroughEveryPlatformWarmed(t *testing.T) {
	src := pulltest.LayoutStore(t)
	mirror := pulltest.OpenStore(t, "oci://"+registrytest.StartFaulty(t).Addr()+"/murmur", ocistore.Options{})
	a, b := pulltest.Pack(t, "grep", "1.0.0", 406), pulltest.Pack(t, "grep", "1.0.0", 407)
	pulltest.Push(t, src, grep, "1.0.0", "linux-x86_64", a)
	pulltest.Push(t, src, grep, "1.0.0", "darwin-aarch64", b)
	w := newWorld(t)
	pl := w.puller(src)
	w.mustPull(pl, pulltest.Req(grep, "1.0.0"))
	pl.Pipeline().Platform = "darwin-aarch64"
	w.mustPull(pl, pulltest.Req(grep, "1.0.0"))
	w2 := newWorld(t)
	w2.Proj = w.Proj
	mirroring := w2.puller(src)
	mirroring.Pipeline().Mirror.Store = mirror
	mirroring.Pipeline().Compile.Precompile = func(context.Context, []byte) error { return nil }
	if _, err := fetch.Warm(context.Background(), fetch.WarmInput{Project: w.Proj, Lock: w.ReadLock(), Platform: "all", Puller: mirroring}); err != nil {
		t.Fatal(err)
	}
	// Warm's passes are copies: the command's Puller still compiles what it pulls, for linux-x86_64.
	if pp := mirroring.Pipeline(); pp.Platform != "linux-x86_64" || pp.Compile.Precompile == nil {
		t.Fatalf("after warming every platform the command's Puller pulls for %s, compiles %v; want it as it was", pp.Platform, pp.Compile.Precompile != nil)
	}
	for plat, p := range map[string]pulltest.Packed{"linux-x86_64": a, "darwin-aarch64": b} {
		d, err := mirror.Resolve(context.Background(), grep, "1.0.0", plat)
		if err != nil || d.Digest != p.Digest() || d.Platform != plat {
			t.Errorf("%s: the mirror holds %+v, %v", plat, d, err)
		}
	}
}
