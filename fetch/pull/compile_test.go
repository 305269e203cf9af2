package pull_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"hash"
	"sync"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/internal/slowdown"
)

// fakeCompiled is a compiled cache keyed by the payload's plain SHA-256, which remembers keys by
// blob and counts the key hashes it hands out.
type fakeCompiled struct {
	has    map[[32]byte]bool
	mu     sync.Mutex
	keys   map[digest.Digest][]byte
	hashes int // ModuleKey calls
	asked  [][]byte
}

func (f *fakeCompiled) ModuleKey() hash.Hash {
	f.mu.Lock()
	f.hashes++
	f.mu.Unlock()
	return sha256.New()
}

func (f *fakeCompiled) HasCompiled(key []byte) bool {
	f.mu.Lock()
	f.asked = append(f.asked, key)
	f.mu.Unlock()
	var k [32]byte
	copy(k[:], key)
	return f.has[k]
}

func (f *fakeCompiled) BlobKey(d digest.Digest) ([]byte, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k, ok := f.keys[d]
	return k, ok
}

func (f *fakeCompiled) RememberBlobKey(d digest.Digest, key []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.keys == nil {
		f.keys = map[digest.Digest][]byte{}
	}
	f.keys[d] = bytes.Clone(key)
}

// events records a pull's events in order.
type events struct {
	mu   sync.Mutex
	list []pull.Event
	on   func(pull.Event)
}

func (e *events) add(ev pull.Event) {
	e.mu.Lock()
	e.list = append(e.list, ev)
	on := e.on
	e.mu.Unlock()
	if on != nil {
		on(ev)
	}
}

func (e *events) phases(name string) []pull.Phase {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []pull.Phase
	for _, ev := range e.list {
		if ev.Name == name && ev.Phase != pull.PhaseFetch {
			out = append(out, ev.Phase)
		}
	}
	return out
}

// TestPullCompilesOnlyWhatIsMissing pulls three fresh artifacts whose first payload the
// compiled cache holds already: only the other two are read back and compiled, each shows the
// compiling phase before done, and the first goes straight to done.
func TestPullCompilesOnlyWhatIsMissing(t *testing.T) {
	t.Parallel()
	w := pulltest.NewWorld(t)
	st := pulltest.LayoutStore(t)
	var names []ref.Name
	var pks []pulltest.Packed
	for i := range 3 {
		n := ref.Name{Scope: "acme", Name: []string{"one", "two", "three"}[i]}
		p := pulltest.Pack(t, n.Name, "1.0.0", uint64(40+i))
		pulltest.Push(t, st, n, "1.0.0", ref.PlatformAny, p)
		names, pks = append(names, n), append(pks, p)
	}
	cache := &fakeCompiled{has: map[[32]byte]bool{sha256.Sum256(pks[0].Wasm): true}}
	var mu sync.Mutex
	var compiled [][]byte
	ev := &events{}
	pl := w.Puller(st)
	pl.Compile.Cache = cache
	pl.Report.Events = ev.add
	pl.Compile.Precompile = func(_ context.Context, wasm []byte) error {
		mu.Lock()
		defer mu.Unlock()
		compiled = append(compiled, bytes.Clone(wasm)) // wasm is mapped only until Precompile returns
		return nil
	}
	w.MustPull(pl, pulltest.Req(names[0], "1.0.0"), pulltest.Req(names[1], "1.0.0"), pulltest.Req(names[2], "1.0.0"))
	if len(compiled) != 2 {
		t.Fatalf("compiled %d payloads, want 2", len(compiled))
	}
	for _, c := range compiled {
		if bytes.Equal(c, pks[0].Wasm) {
			t.Error("compiled the payload the cache holds")
		}
	}
	want := map[string][]pull.Phase{
		"acme/one":   {pull.PhaseResolve, pull.PhaseVerify, pull.PhaseDone},
		"acme/two":   {pull.PhaseResolve, pull.PhaseVerify, pull.PhaseCompile, pull.PhaseDone},
		"acme/three": {pull.PhaseResolve, pull.PhaseVerify, pull.PhaseCompile, pull.PhaseDone},
	}
	for name, phases := range want {
		if got := ev.phases(name); !equalPhases(got, phases) {
			t.Errorf("%s: phases %v, want %v", name, got, phases)
		}
	}
}

// A pull remembers the key it hashed for each fresh payload, by blob; the next pull of those
// blobs into an empty CAS hashes no payload and asks the compiled cache with the keys it
// remembered, compiling exactly what the cache still lacks.
func TestPullRemembersPayloadKeys(t *testing.T) {
	t.Parallel()
	st := pulltest.LayoutStore(t)
	var reqs []pull.Request
	var pks []pulltest.Packed
	for i, name := range []string{"one", "two", "three"} {
		n := ref.Name{Scope: "acme", Name: name}
		p := pulltest.Pack(t, name, "1.0.0", uint64(60+i))
		pulltest.Push(t, st, n, "1.0.0", ref.PlatformAny, p)
		reqs, pks = append(reqs, pulltest.Req(n, "1.0.0")), append(pks, p)
	}
	cache := &fakeCompiled{has: map[[32]byte]bool{sha256.Sum256(pks[0].Wasm): true}}
	pull := func() int {
		w := pulltest.NewWorld(t)
		pl := w.Puller(st)
		pl.Compile.Cache = cache
		var mu sync.Mutex
		compiled := 0
		pl.Compile.Precompile = func(context.Context, []byte) error { mu.Lock(); compiled++; mu.Unlock(); return nil }
		w.MustPull(pl, reqs...)
		return compiled
	}
	if n := pull(); n != 2 || cache.hashes == 0 {
		t.Fatalf("first pull: %d compiled, %d key hashes; want 2 and some", n, cache.hashes)
	}
	for _, p := range pks {
		if k, ok := cache.keys[p.Digest()]; !ok || !bytes.Equal(k, func() []byte { s := sha256.Sum256(p.Wasm); return s[:] }()) {
			t.Fatalf("the key remembered for %s is %x (%v), want its payload's", p.Digest(), k, ok)
		}
	}
	cache.hashes, cache.asked = 0, nil
	if n := pull(); n != 2 {
		t.Fatalf("second pull compiled %d payloads, want the 2 the cache lacks", n)
	}
	if cache.hashes != 0 || len(cache.asked) != 3 {
		t.Fatalf("second pull: %d key hashes and %d questions to the cache, want 0 and 3", cache.hashes, len(cache.asked))
	}
}

func equalPhases(a, b []pull.Phase) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestPullCompilesBesideDownloads holds the first artifact's compile until the second
// artifact's download is in: with one job, the second download could not start if the compile
// held the job.
func TestPullCompilesBesideDownloads(t *testing.T) {
	t.Parallel()
	w := pulltest.NewWorld(t)
	st := pulltest.LayoutStore(t)
	first, second := ref.Name{Scope: "acme", Name: "first"}, ref.Name{Scope: "acme", Name: "second"}
	pulltest.Push(t, st, first, "1.0.0", ref.PlatformAny, pulltest.Pack(t, "first", "1.0.0", 1))
	pulltest.Push(t, st, second, "1.0.0", ref.PlatformAny, pulltest.Pack(t, "second", "1.0.0", 2))
	secondIn := make(chan struct{})
	var once sync.Once
	ev := &events{on: func(e pull.Event) {
		if e.Name == "acme/second" && e.Phase == pull.PhaseCompile {
			once.Do(func() { close(secondIn) })
		}
	}}
	pl := w.Puller(st)
	pl.Limits.Jobs = 1
	pl.Report.Events = ev.add
	var calls int
	pl.Compile.Precompile = func(ctx context.Context, wasm []byte) error {
		calls++
		if calls == 1 {
			// The second artifact is downloaded, checked and pinned while this waits.
			select {
			case <-secondIn:
			case <-time.After(slowdown.Scale(30 * time.Second)):
				t.Error("the second artifact never reached its compile while the first's waited")
			}
		}
		return nil
	}
	res := w.MustPull(pl, pulltest.Req(first, "1.0.0"), pulltest.Req(second, "1.0.0"))
	if calls != 2 || len(res) != 2 {
		t.Fatalf("%d compiles, %d results", calls, len(res))
	}
}
