package warm

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/internal/testfakes/packtest"
	"github.com/murmur-nexus/mur/lock"
)

// packed builds a packed artifact; description makes two builds of one version differ.
func packed(name, version, description string) []byte {
	return packtest.Spec{Name: name, Version: version, Description: description, Wasm: packtest.Tagged(name)}.Zip()
}

func openLayout(t *testing.T, dir string) fetch.Store {
	t.Helper()
	s, err := ocistore.Open("oci-layout:"+dir, ocistore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// pin is one blob a test serves and pins.
type pin struct {
	name, version, platform string
	blob                    []byte
}

func (p pin) digest() digest.Digest { return digest.FromBytes(p.blob) }

func push(t *testing.T, store fetch.Store, p pin) {
	t.Helper()
	n, err := ref.ParseName(p.name)
	if err != nil {
		t.Fatal(err)
	}
	desc := fetch.Descriptor{Name: n, Version: p.version, Platform: p.platform, Digest: p.digest(), Size: int64(len(p.blob)), Title: n.Name + "-" + p.version + ".mur.zip"}
	if err := store.Push(context.Background(), desc, bytes.NewReader(p.blob)); err != nil {
		t.Fatal(err)
	}
}

// machine is one Murmur home and project.
type machine struct {
	cas     *cas.Store
	project fetch.Project
}

func newMachine(t *testing.T, pins []pin) *machine {
	t.Helper()
	store, err := cas.Open(filepath.Join(t.TempDir(), "home", "cas"))
	if err != nil {
		t.Fatal(err)
	}
	m := &machine{cas: store, project: fetch.Project{Dir: t.TempDir()}}
	err = lock.Update(context.Background(), m.project.LockPath(), func(l *lock.Lock) error {
		for _, p := range pins {
			if err := l.Upsert(p.name, p.version, p.platform, p.digest().Encoded(), "", false); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (m *machine) lock(t *testing.T) *lock.Lock {
	t.Helper()
	l, err := lock.Read(m.project.LockPath())
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func (m *machine) input(t *testing.T, stores ...fetch.Store) Input {
	return Input{Project: m.project, Lock: m.lock(t), Puller: &fetch.Puller{CAS: m.cas, Stores: stores}}
}

// compiles counts Precompile calls by payload.
type compiles map[string]int

func (c compiles) fn(ctx context.Context, wasm []byte) error {
	c[string(wasm)]++
	return nil
}

func twoArtifacts(t *testing.T) []pin {
	return []pin{
		{"acme/one", "1.0.0", ref.PlatformAny, packed("one", "1.0.0", "")},
		{"acme/two", "2.0.0", ref.PlatformAny, packed("two", "2.0.0", "")},
	}
}

func TestRunFetchesThenCaches(t *testing.T) {
	pins := twoArtifacts(t)
	store := openLayout(t, filepath.Join(t.TempDir(), "store"))
	for _, p := range pins {
		push(t, store, p)
	}
	m := newMachine(t, pins)
	lockBefore, _ := os.ReadFile(m.project.LockPath())
	ctx := context.Background()
	calls := compiles{}
	in := m.input(t, store)
	in.Precompile = calls.fn

	rep, err := Run(ctx, in)
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
		if err := fetch.CheckStaged(m.project, n, p.digest()); err != nil {
			t.Errorf("tools/ of %s: %v", p.name, err)
		}
		if calls[string(packtest.Tagged(n.Name))] != 1 {
			t.Errorf("%s was precompiled %d times, want once", p.name, calls[string(packtest.Tagged(n.Name))])
		}
	}
	if len(calls) != 2 {
		t.Errorf("precompiled %d distinct payloads, want 2", len(calls))
	}

	rep, err = Run(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Artifacts != 2 || rep.Fetched != 0 || rep.Cached != 2 || rep.Bytes != 0 || rep.Compiled != 2 {
		t.Fatalf("second warm: %+v", rep)
	}
	// Warm compiles cache hits too: a cache copied from another machine has no compiled forms.
	for _, p := range pins {
		n, _ := ref.ParseName(p.name)
		if calls[string(packtest.Tagged(n.Name))] != 2 {
			t.Errorf("%s was precompiled %d times over two warms, want twice", p.name, calls[string(packtest.Tagged(n.Name))])
		}
	}
	if lockAfter, _ := os.ReadFile(m.project.LockPath()); !bytes.Equal(lockAfter, lockBefore) {
		t.Errorf("warming changed murmur.lock:\n%s\n---\n%s", lockBefore, lockAfter)
	}
}

func TestRunPrecompileFailure(t *testing.T) {
	pins := twoArtifacts(t)[:1]
	store := openLayout(t, filepath.Join(t.TempDir(), "store"))
	push(t, store, pins[0])
	m := newMachine(t, pins)
	in := m.input(t, store)
	in.Precompile = func(context.Context, []byte) error { return errors.New("memory minimum over the cap") }
	_, err := Run(context.Background(), in)
	if !errors.Is(err, errs.InvalidArtifact) || !strings.Contains(err.Error(), "acme/one@1.0.0") || !strings.Contains(err.Error(), "memory minimum") {
		t.Fatalf("a payload that can't compile: %v", err)
	}
	if !m.cas.Has(pins[0].digest()) {
		t.Error("the pulled blob is gone after a compile failure")
	}
}

func TestRunLayoutServesAnotherMachine(t *testing.T) {
	pins := twoArtifacts(t)
	store := openLayout(t, filepath.Join(t.TempDir(), "store"))
	for _, p := range pins {
		push(t, store, p)
	}
	ctx := context.Background()
	m := newMachine(t, pins)
	in := m.input(t, store)
	mirror := openLayout(t, filepath.Join(t.TempDir(), "mirror"))
	in.Layout = mirror
	if _, err := Run(ctx, in); err != nil {
		t.Fatal(err)
	}
	// Again, from a warm cache: the mirror already holds everything, and pushing it is a no-op.
	if _, err := Run(ctx, in); err != nil {
		t.Fatal(err)
	}

	m2 := newMachine(t, pins)
	rep, err := Run(ctx, m2.input(t, mirror))
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
		{"acme/one", "1.0.0", ref.PlatformAny, packed("one", "1.0.0", "")},
		{"acme/multi", "3.0.0", host, packed("multi", "3.0.0", "for "+host)},
		{"acme/multi", "3.0.0", other, packed("multi", "3.0.0", "for "+other)},
	}
	store := openLayout(t, filepath.Join(t.TempDir(), "store"))
	for _, p := range pins {
		push(t, store, p)
	}
	m := newMachine(t, pins)
	ctx := context.Background()
	calls := compiles{}
	in := m.input(t, store)
	in.Precompile = calls.fn

	// This machine's platform alone.
	rep, err := Run(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Artifacts != 2 || rep.Fetched != 2 || m.cas.Has(pins[2].digest()) {
		t.Fatalf("host warm: %+v", rep)
	}

	in.Platform = "all"
	rep, err = Run(ctx, in)
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
	if calls[string(packtest.Tagged("one"))] != 2 || calls[string(packtest.Tagged("multi"))] != 2 {
		t.Errorf("precompile calls %v: want each payload this machine runs compiled once per warm", calls)
	}
	// tools/ still holds this machine's build.
	n, _ := ref.ParseName("acme/multi")
	if err := fetch.CheckStaged(m.project, n, pins[1].digest()); err != nil {
		t.Errorf("after warming every platform: %v", err)
	}

	// One named platform.
	in.Platform = other
	rep, err = Run(ctx, in)
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
		{"acme/one", "1.0.0", ref.PlatformAny, packed("one", "1.0.0", "")},
		{"acme/multi", "3.0.0", host, packed("multi", "3.0.0", "for "+host)},
		{"acme/multi", "3.0.0", other, packed("multi", "3.0.0", "for "+other)},
	}
	store := openLayout(t, filepath.Join(t.TempDir(), "store"))
	push(t, store, pins[0])
	push(t, store, pins[1]) // nobody serves the other platform's build
	m := newMachine(t, pins)
	lockBefore, _ := os.ReadFile(m.project.LockPath())
	in := m.input(t, store)
	in.Platform = "all"
	rep, err := Run(context.Background(), in)
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
	if lockAfter, _ := os.ReadFile(m.project.LockPath()); !bytes.Equal(lockAfter, lockBefore) {
		t.Errorf("a failed warm changed murmur.lock")
	}
}

func TestRunFrom(t *testing.T) {
	pins := twoArtifacts(t)[:1]
	store := openLayout(t, filepath.Join(t.TempDir(), "store"))
	push(t, store, pins[0])
	m := newMachine(t, pins)
	in := m.input(t, store)
	var asked []string
	in.From = func(name string) ([]string, error) {
		asked = append(asked, name)
		return []string{fetch.FromSources}, nil
	}
	rep, err := Run(context.Background(), in)
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
	if _, err := Run(context.Background(), in); !errors.Is(err, boom) {
		t.Fatalf("From's error: %v", err)
	}

	in.From = func(string) ([]string, error) { return []string{fetch.FromStores}, nil }
	if rep, err := Run(context.Background(), in); err != nil || rep.Fetched != 1 {
		t.Fatalf("stores only: %v %+v", err, rep)
	}
}

func TestRunOfflineCold(t *testing.T) {
	pins := twoArtifacts(t)
	store := openLayout(t, filepath.Join(t.TempDir(), "store"))
	for _, p := range pins {
		push(t, store, p)
	}
	m := newMachine(t, pins)
	in := m.input(t, store)
	in.Puller.Offline = true
	_, err := Run(context.Background(), in)
	if !errors.Is(err, errs.Offline) || !strings.Contains(err.Error(), "mur warm") {
		t.Fatalf("offline with a cold cache: %v", err)
	}
	for _, p := range pins {
		if m.cas.Has(p.digest()) {
			t.Errorf("%s was fetched offline", p.name)
		}
	}
}

func TestPlatformsOrder(t *testing.T) {
	l := &lock.Lock{}
	for _, e := range []struct{ name, platform string }{
		{"acme/a", "linux-x86_64"}, {"acme/a", "darwin-aarch64"}, {"acme/a", "linux-aarch64"}, {"acme/b", ref.PlatformAny},
	} {
		if err := l.Upsert(e.name, "1.0.0", e.platform, strings.Repeat("ab", 32), "", false); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		want, host string
		out        []string
	}{
		// The host's pass comes last, so that tools/ ends up staged from the host's build.
		{"all", "darwin-aarch64", []string{"any", "linux-aarch64", "linux-x86_64", "darwin-aarch64"}},
		{"all", "linux-x86_64", []string{"any", "darwin-aarch64", "linux-aarch64", "linux-x86_64"}},
		{"", "linux-aarch64", []string{"linux-aarch64"}},
		{"darwin-aarch64", "linux-x86_64", []string{"darwin-aarch64"}},
	}
	for _, tt := range tests {
		if got := platforms(l, tt.want, tt.host); strings.Join(got, " ") != strings.Join(tt.out, " ") {
			t.Errorf("platforms(%q, host %s) = %v, want %v", tt.want, tt.host, got, tt.out)
		}
	}
}
