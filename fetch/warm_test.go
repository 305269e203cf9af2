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
	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/stage"
	fstore "github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
)

// newPinnedWorld is a project whose murmur.lock already pins pins, with an empty CAS.
func newPinnedWorld(t *testing.T, pins []pin) *world {
	t.Helper()
	w := newWorld(t)
	w.pinAll(pins)
	return w
}

func (w *world) warmInput(stores ...fstore.Store) fetch.WarmInput {
	return fetch.WarmInput{Project: w.proj, Lock: w.readLock(), Puller: &fetch.Puller{Puller: &pull.Puller{CAS: w.cas, Stores: stores}}}
}

// compiles counts Precompile calls by payload.
type compiles map[string]int

func (c compiles) fn(ctx context.Context, wasm []byte) error {
	c[string(wasm)]++
	return nil
}

func twoArtifacts(t *testing.T) []pin {
	return []pin{
		{"acme/one", "1.0.0", ref.PlatformAny, zipOf("one", "1.0.0", "")},
		{"acme/two", "2.0.0", ref.PlatformAny, zipOf("two", "2.0.0", "")},
	}
}

func TestRunFetchesThenCaches(t *testing.T) {
	pins := twoArtifacts(t)
	store := openStore(t, "oci-layout:"+filepath.Join(t.TempDir(), "store"), ocistore.Options{})
	for _, p := range pins {
		pushPin(t, store, p)
	}
	m := newPinnedWorld(t, pins)
	lockBefore, _ := os.ReadFile(m.proj.LockPath())
	ctx := context.Background()
	calls := compiles{}
	in := m.warmInput(store)
	in.Precompile = calls.fn

	rep, err := fetch.Warm(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	size := int64(len(pins[0].blob) + len(pins[1].blob))
	if rep.Artifacts != 2 || rep.Fetched != 2 || rep.Cached != 0 || rep.Bytes != size || rep.Compiled != 2 || len(rep.Results) != 2 {
		t.Fatalf("first warm: %+v", rep)
	}
	for _, r := range rep.Results {
		if r.Origin != store.String() || r.CacheHit {
			t.Errorf("result %+v, want fetched from %s", r, store)
		}
	}
	for _, p := range pins {
		if !m.cas.Has(p.digest()) {
			t.Errorf("%s is not in the CAS", p.name)
		}
		n, _ := ref.ParseName(p.name)
		if err := stage.CheckStaged(m.proj.Tools(), n, p.digest()); err != nil {
			t.Errorf("tools/ of %s: %v", p.name, err)
		}
		if calls[string(artifacttest.Tagged(n.Name))] != 1 {
			t.Errorf("%s was precompiled %d times, want once", p.name, calls[string(artifacttest.Tagged(n.Name))])
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
		n, _ := ref.ParseName(p.name)
		if calls[string(artifacttest.Tagged(n.Name))] != 2 {
			t.Errorf("%s was precompiled %d times over two warms, want twice", p.name, calls[string(artifacttest.Tagged(n.Name))])
		}
	}
	if lockAfter, _ := os.ReadFile(m.proj.LockPath()); !bytes.Equal(lockAfter, lockBefore) {
		t.Errorf("warming changed murmur.lock:\n%s\n---\n%s", lockBefore, lockAfter)
	}
}

func TestRunPrecompileFailure(t *testing.T) {
	pins := twoArtifacts(t)[:1]
	store := openStore(t, "oci-layout:"+filepath.Join(t.TempDir(), "store"), ocistore.Options{})
	pushPin(t, store, pins[0])
	m := newPinnedWorld(t, pins)
	in := m.warmInput(store)
	in.Precompile = func(context.Context, []byte) error { return errors.New("memory minimum over the cap") }
	_, err := fetch.Warm(context.Background(), in)
	if !errors.Is(err, errs.InvalidArtifact) || !strings.Contains(err.Error(), "acme/one@1.0.0") || !strings.Contains(err.Error(), "memory minimum") {
		t.Fatalf("a payload that can't compile: %v", err)
	}
	if !m.cas.Has(pins[0].digest()) {
		t.Error("the pulled blob is gone after a compile failure")
	}
}

func TestRunLayoutServesAnotherMachine(t *testing.T) {
	pins := twoArtifacts(t)
	store := openStore(t, "oci-layout:"+filepath.Join(t.TempDir(), "store"), ocistore.Options{})
	for _, p := range pins {
		pushPin(t, store, p)
	}
	ctx := context.Background()
	m := newPinnedWorld(t, pins)
	in := m.warmInput(store)
	mirror := openStore(t, "oci-layout:"+filepath.Join(t.TempDir(), "mirror"), ocistore.Options{})
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
		if !m2.cas.Has(p.digest()) {
			t.Errorf("%s is not in the second machine's CAS", p.name)
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
	pins := []pin{
		{"acme/one", "1.0.0", ref.PlatformAny, zipOf("one", "1.0.0", "")},
		{"acme/multi", "3.0.0", host, zipOf("multi", "3.0.0", "for "+host)},
		{"acme/multi", "3.0.0", other, zipOf("multi", "3.0.0", "for "+other)},
	}
	store := openStore(t, "oci-layout:"+filepath.Join(t.TempDir(), "store"), ocistore.Options{})
	for _, p := range pins {
		pushPin(t, store, p)
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
	if rep.Artifacts != 2 || rep.Fetched != 2 || m.cas.Has(pins[2].digest()) {
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
		if !m.cas.Has(p.digest()) {
			t.Errorf("%s for %s is not in the CAS", p.name, p.platform)
		}
	}
	if calls[string(artifacttest.Tagged("one"))] != 2 || calls[string(artifacttest.Tagged("multi"))] != 2 {
		t.Errorf("precompile calls %v: want each payload this machine runs compiled once per warm", calls)
	}
	// tools/ still holds this machine's build.
	n, _ := ref.ParseName("acme/multi")
	if err := stage.CheckStaged(m.proj.Tools(), n, pins[1].digest()); err != nil {
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
	pins := []pin{
		{"acme/one", "1.0.0", ref.PlatformAny, zipOf("one", "1.0.0", "")},
		{"acme/multi", "3.0.0", host, zipOf("multi", "3.0.0", "for "+host)},
		{"acme/multi", "3.0.0", other, zipOf("multi", "3.0.0", "for "+other)},
	}
	store := openStore(t, "oci-layout:"+filepath.Join(t.TempDir(), "store"), ocistore.Options{})
	pushPin(t, store, pins[0])
	pushPin(t, store, pins[1]) // nobody serves the other platform's build
	m := newPinnedWorld(t, pins)
	lockBefore, _ := os.ReadFile(m.proj.LockPath())
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
	if !m.cas.Has(pins[0].digest()) || rep.Artifacts < 1 {
		t.Errorf("acme/one was not kept warm: %+v", rep)
	}
	if m.cas.Has(pins[2].digest()) {
		t.Error("the unserved blob is in the CAS")
	}
	if lockAfter, _ := os.ReadFile(m.proj.LockPath()); !bytes.Equal(lockAfter, lockBefore) {
		t.Errorf("a failed warm changed murmur.lock")
	}
}

func TestRunFrom(t *testing.T) {
	pins := twoArtifacts(t)[:1]
	store := openStore(t, "oci-layout:"+filepath.Join(t.TempDir(), "store"), ocistore.Options{})
	pushPin(t, store, pins[0])
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
	if rep.Artifacts != 0 || m.cas.Has(pins[0].digest()) {
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
	store := openStore(t, "oci-layout:"+filepath.Join(t.TempDir(), "store"), ocistore.Options{})
	for _, p := range pins {
		pushPin(t, store, p)
	}
	m := newPinnedWorld(t, pins)
	in := m.warmInput(networked(store))
	in.Puller.Offline = true
	_, err := fetch.Warm(context.Background(), in)
	if !errors.Is(err, errs.Offline) || !strings.Contains(err.Error(), "mur warm") {
		t.Fatalf("offline with a cold cache: %v", err)
	}
	for _, p := range pins {
		if m.cas.Has(p.digest()) {
			t.Errorf("%s was fetched offline", p.name)
		}
	}
}
