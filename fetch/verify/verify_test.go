package verify_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/fetch/stage"
	fstore "github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/fetch/verify"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
)

var grep = ref.Name{Scope: "acme", Name: "grep"}

// verifyWorld is a world whose project pulled acme/grep and acme/cat from an OCI layout store.
type verifyWorld struct {
	*pulltest.World
	ctx     context.Context
	layout  fstore.Store
	digests map[string]digest.Digest // by artifact name
}

func newVerifyWorld(t *testing.T) *verifyWorld {
	t.Helper()
	w := &verifyWorld{World: pulltest.NewWorld(t), ctx: context.Background()}
	w.layout, w.digests = w.PulledPair()
	return w
}

// repairer is the pipeline as the verbs hand it to verify, for this machine's platform; its
// failures are said as the pipeline words them (fetch adds its hints).
type repairer struct{ *pull.Puller }

func (repairer) RepairHint(r pull.Result) string { return r.Error }

func (w *verifyWorld) repairer() repairer { return w.repairerOf(w.layout) }

func (w *verifyWorld) repairerOf(stores ...fstore.Store) repairer {
	p := w.Puller(stores...)
	p.Platform = ""
	return repairer{p}
}

func (w *verifyWorld) input(t *testing.T) verify.Input {
	t.Helper()
	return verify.Input{Project: w.Proj, Lock: w.ReadLock(), CAS: w.CAS}
}

func (w *verifyWorld) run(t *testing.T, in verify.Input) *verify.Report {
	t.Helper()
	rep, err := verify.Run(w.ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func (w *verifyWorld) mustBeClean(t *testing.T) {
	t.Helper()
	rep := w.run(t, w.input(t))
	if len(rep.Problems) != 0 || rep.Unrepaired() != 0 {
		t.Fatalf("want no problems, got %+v", rep.Problems)
	}
}

// problems keeps the problems of kind.
func problems(rep *verify.Report, kind string) []verify.Problem {
	var out []verify.Problem
	for _, p := range rep.Problems {
		if p.Kind == kind {
			out = append(out, p)
		}
	}
	return out
}

func (w *verifyWorld) quarantined(t *testing.T) []string {
	t.Helper()
	es, err := os.ReadDir(filepath.Join(w.CAS.Root(), "quarantine"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func TestClean(t *testing.T) {
	t.Parallel()
	w := newVerifyWorld(t)
	rep := w.run(t, w.input(t))
	if rep.Blobs != 2 || rep.Tools != 2 || rep.Compiled != 0 {
		t.Errorf("checked %d blobs, %d tools, %d compiled; want 2, 2, 0", rep.Blobs, rep.Tools, rep.Compiled)
	}
	if rep.Problems == nil || len(rep.Problems) != 0 || rep.Unrepaired() != 0 || rep.RepairedCount() != 0 {
		t.Errorf("a clean project has problems: %+v", rep.Problems)
	}
}

func TestMissingBlob(t *testing.T) {
	t.Parallel()
	w := newVerifyWorld(t)
	d := w.digests["acme/grep"]
	if err := os.Remove(w.CAS.Path(d)); err != nil {
		t.Fatal(err)
	}
	rep := w.run(t, w.input(t))
	blobs := problems(rep, "blob")
	if len(blobs) != 1 || len(rep.Problems) != 1 {
		t.Fatalf("want one blob problem, got %+v", rep.Problems)
	}
	p := blobs[0]
	if p.Subject != "acme/grep "+d.String() || p.Repaired || !strings.Contains(p.Problem, "not in the CAS") || !strings.Contains(p.Problem, "mur verify --repair") {
		t.Errorf("problem %+v", p)
	}
	if rep.Unrepaired() != 1 || rep.RepairedCount() != 0 {
		t.Errorf("Unrepaired %d RepairedCount %d", rep.Unrepaired(), rep.RepairedCount())
	}
	if rep.Tools != 1 {
		t.Errorf("Tools = %d: the staged copy of a missing blob can't be checked, the other can", rep.Tools)
	}

	in := w.input(t)
	in.Repair = w.repairer()
	rep = w.run(t, in)
	if len(rep.Problems) != 1 || !rep.Problems[0].Repaired || rep.Unrepaired() != 0 || rep.RepairedCount() != 1 {
		t.Fatalf("repair: %+v", rep.Problems)
	}
	if !w.CAS.Has(d) {
		t.Fatal("the repaired blob is not in the CAS")
	}
	w.mustBeClean(t)
}

func TestCorruptBlob(t *testing.T) {
	t.Parallel()
	w := newVerifyWorld(t)
	d := w.digests["acme/cat"]
	path := w.CAS.Path(d)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o444); err != nil {
		t.Fatal(err)
	}
	rep := w.run(t, w.input(t))
	blobs := problems(rep, "blob")
	if len(blobs) != 1 || blobs[0].Subject != "acme/cat "+d.String() || blobs[0].Repaired {
		t.Fatalf("want one blob problem for acme/cat, got %+v", rep.Problems)
	}
	if !strings.Contains(blobs[0].Problem, "hashes to") {
		t.Errorf("the problem does not say what was found: %s", blobs[0].Problem)
	}
	if w.CAS.Has(d) {
		t.Error("the corrupted blob is still in the CAS")
	}
	if q := w.quarantined(t); len(q) != 1 || !strings.HasPrefix(q[0], d.Encoded()) {
		t.Errorf("quarantine holds %v, want the corrupted blob", q)
	}

	in := w.input(t)
	in.Repair = w.repairer()
	if rep := w.run(t, in); rep.Unrepaired() != 0 || rep.RepairedCount() != 1 {
		t.Fatalf("repair: %+v", rep.Problems)
	}
	w.mustBeClean(t)
}

func TestEditedTools(t *testing.T) {
	t.Parallel()
	w := newVerifyWorld(t)
	n, _ := ref.ParseName("acme/grep")
	dir := stage.StagedDir(w.Proj.Tools(), n)
	if err := os.WriteFile(filepath.Join(dir, "capsule.wasm"), []byte("edited by hand"), 0o644); err != nil {
		t.Fatal(err)
	}
	rep := w.run(t, w.input(t))
	tools := problems(rep, "tools")
	if len(tools) != 1 || len(rep.Problems) != 1 || tools[0].Subject != dir || tools[0].Repaired {
		t.Fatalf("want one tools problem for %s, got %+v", dir, rep.Problems)
	}
	if !strings.Contains(tools[0].Problem, "capsule.wasm") {
		t.Errorf("the problem does not name the file: %s", tools[0].Problem)
	}

	in := w.input(t)
	in.Repair = w.repairer()
	rep = w.run(t, in)
	if len(rep.Problems) != 1 || !rep.Problems[0].Repaired || rep.Unrepaired() != 0 {
		t.Fatalf("repair: %+v", rep.Problems)
	}
	if err := stage.CheckStaged(w.Proj.Tools(), n, w.digests["acme/grep"]); err != nil {
		t.Fatalf("after repair: %v", err)
	}
	w.mustBeClean(t)

	// A staged folder that is gone altogether is a problem too, and repaired the same way.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if rep := w.run(t, w.input(t)); len(problems(rep, "tools")) != 1 {
		t.Fatalf("a missing tools/ folder: %+v", rep.Problems)
	}
	if rep := w.run(t, in); rep.Unrepaired() != 0 {
		t.Fatalf("repair of a missing tools/ folder: %+v", rep.Problems)
	}
	w.mustBeClean(t)
}

func TestPins(t *testing.T) {
	t.Parallel()
	w := newVerifyWorld(t)
	err := lock.Update(w.ctx, w.Proj.LockPath(), func(l *lock.Lock) error {
		return l.SetPin("acme", lock.ScopePin{Source: "github:acme/murmur-tools", OwnerID: 11, RepoID: 22})
	})
	if err != nil {
		t.Fatal(err)
	}
	in := w.input(t)
	in.SourceFor = func(scope string) string { return "github:" + scope + "/murmur-tools" }
	if rep := w.run(t, in); len(rep.Problems) != 0 {
		t.Fatalf("a pin that matches the configuration: %+v", rep.Problems)
	}
	// GitHub owners are case-insensitive: the pull accepts github:Acme/… for a pin of
	// github:acme/…, and verify must agree with it.
	in.SourceFor = func(scope string) string { return "github:Acme/murmur-tools" }
	if rep := w.run(t, in); len(rep.Problems) != 0 {
		t.Fatalf("a pin that differs from the configuration only in the owner's case: %+v", rep.Problems)
	}
	if err := (lock.ScopePin{Source: "github:acme/murmur-tools", OwnerID: 11}).CheckOwner("acme", "github:Acme/murmur-tools", 0); err != nil {
		t.Fatalf("the pull refuses what verify accepts: %v", err)
	}
	in.SourceFor = func(scope string) string { return "github:newowner/murmur-tools" }
	rep := w.run(t, in)
	pins := problems(rep, "pin")
	if len(pins) != 1 || len(rep.Problems) != 1 || pins[0].Subject != "acme" || pins[0].Repaired {
		t.Fatalf("want one pin problem for acme, got %+v", rep.Problems)
	}
	for _, want := range []string{"github:acme/murmur-tools", "github:newowner/murmur-tools", "11", "mur lock forget-scope acme"} {
		if !strings.Contains(pins[0].Problem, want) {
			t.Errorf("the pin problem does not mention %q: %s", want, pins[0].Problem)
		}
	}
	// Repair can't settle an owner question: that is the user's call.
	in.Repair = w.repairer()
	if rep := w.run(t, in); rep.Unrepaired() != 1 {
		t.Fatalf("repair settled a pin problem: %+v", rep.Problems)
	}
}

// fakeCompiler stands in for the sandbox runner. A repair removes its damaged entries unless
// stuck, as a real one that can't remove them would.
type fakeCompiler struct {
	damaged  []string
	cacheErr error
	stuck    bool

	mu          sync.Mutex
	repairAsked []bool
	compiled    [][]byte
}

func (f *fakeCompiler) CheckCache(repair bool) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.repairAsked = append(f.repairAsked, repair)
	found := f.damaged
	if repair && !f.stuck {
		f.damaged = nil
	}
	return found, f.cacheErr
}

func (f *fakeCompiler) Precompile(ctx context.Context, wasm []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.compiled = append(f.compiled, bytes.Clone(wasm)) // wasm is mapped only until Precompile returns
	return nil
}

func TestCompiledCache(t *testing.T) {
	t.Parallel()
	w := newVerifyWorld(t)
	fc := &fakeCompiler{damaged: []string{"compiled/v1/aaa", "compiled/v1/bbb"}}
	in := w.input(t)
	in.Runner = fc
	rep := w.run(t, in)
	compiled := problems(rep, "compiled")
	if len(compiled) != 2 || len(rep.Problems) != 2 || compiled[0].Subject != "compiled/v1/aaa" || compiled[1].Subject != "compiled/v1/bbb" {
		t.Fatalf("want two compiled problems, got %+v", rep.Problems)
	}
	if compiled[0].Repaired || rep.Unrepaired() != 2 {
		t.Errorf("reported as repaired without a repairer: %+v", compiled)
	}
	if len(fc.repairAsked) != 1 || fc.repairAsked[0] {
		t.Errorf("CheckCache was asked to repair %v, want once without", fc.repairAsked)
	}
	if rep.Compiled != 2 || len(fc.compiled) != 0 {
		t.Errorf("checked %d compiled modules and compiled %d, want 2 and none without --repair", rep.Compiled, len(fc.compiled))
	}

	fc = &fakeCompiler{damaged: []string{"compiled/v1/aaa"}}
	in.Runner, in.Repair = fc, w.repairer()
	rep = w.run(t, in)
	if len(rep.Problems) != 1 || !rep.Problems[0].Repaired || rep.RepairedCount() != 1 || rep.Unrepaired() != 0 {
		t.Fatalf("repair: %+v", rep.Problems)
	}
	if len(fc.repairAsked) != 2 || !fc.repairAsked[0] || fc.repairAsked[1] {
		t.Errorf("CheckCache was asked to repair %v, want once with, then a look without", fc.repairAsked)
	}
	if len(fc.compiled) != 2 {
		t.Fatalf("repair precompiled %d modules, want both", len(fc.compiled))
	}
	for _, wasm := range fc.compiled {
		if string(wasm) != artifacttest.EmptyModule {
			t.Errorf("precompiled %q, want the payload", wasm)
		}
	}

	// An entry the repair could not remove is not reported as repaired.
	in.Runner = &fakeCompiler{damaged: []string{"compiled/v1/ccc"}, stuck: true}
	if rep = w.run(t, in); len(rep.Problems) != 1 || rep.Problems[0].Repaired {
		t.Fatalf("an entry that stayed: %+v", rep.Problems)
	}

	in.Repair = nil
	in.Runner = &fakeCompiler{cacheErr: errors.New("compiled cache is a symlink")}
	rep = w.run(t, in)
	if c := problems(rep, "compiled"); len(c) != 1 || !strings.Contains(c[0].Problem, "symlink") {
		t.Fatalf("a cache that can't be checked: %+v", rep.Problems)
	}
}

// A component is checked and staged like any payload, but it is not a compiled module: verify
// counts and precompiles only core modules, with --repair or without.
func TestVerifyCountsComponentsApart(t *testing.T) {
	t.Parallel()
	w := newVerifyWorld(t)
	n, _ := ref.ParseName("acme/comp")
	blob := artifacttest.Spec{Name: n.Name, Version: "1.0.0", Wasm: []byte("\x00asm\x0d\x00\x01\x00")}.Zip()
	d := digest.FromBytes(blob)
	desc := fstore.Descriptor{Name: n, Version: "1.0.0", Platform: ref.PlatformAny, Digest: d, Size: int64(len(blob)), Title: "comp-1.0.0.mur.zip"}
	if err := w.layout.Push(w.ctx, desc, bytes.NewReader(blob)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.repairer().Pull(w.ctx, w.Proj, []pull.Request{{Asked: "acme/comp", Name: n, Version: "1.0.0"}}); err != nil {
		t.Fatal(err)
	}
	for _, repair := range []bool{false, true} {
		fc := &fakeCompiler{}
		in := w.input(t)
		in.Runner = fc
		if repair {
			in.Repair = w.repairer()
		}
		rep := w.run(t, in)
		if len(rep.Problems) != 0 || rep.Blobs != 3 || rep.Tools != 3 || rep.Compiled != 2 {
			t.Fatalf("repair %v: checked %d blobs, %d tools, %d compiled, problems %+v; want 3, 3, 2 and none", repair, rep.Blobs, rep.Tools, rep.Compiled, rep.Problems)
		}
		want := 0
		if repair {
			want = 2
		}
		if len(fc.compiled) != want {
			t.Errorf("repair %v: precompiled %d payloads, want %d", repair, len(fc.compiled), want)
		}
	}
}
