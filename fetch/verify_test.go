package fetch_test

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/stage"
	fstore "github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/fetch/verify"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
)

// verifyWorld is a world whose project pulled acme/grep and acme/cat from an OCI layout store.
type verifyWorld struct {
	*world
	ctx     context.Context
	layout  fstore.Store
	digests map[string]digest.Digest // by artifact name
}

func newVerifyWorld(t *testing.T) *verifyWorld {
	t.Helper()
	ctx := context.Background()
	w := &verifyWorld{world: newWorld(t), ctx: ctx, layout: layoutStore(t), digests: map[string]digest.Digest{}}
	layout := w.layout
	var reqs []pull.Request
	for _, name := range []string{"acme/cat", "acme/grep"} {
		n, _ := ref.ParseName(name)
		blob := artifacttest.Spec{Name: n.Name, Version: "1.0.0"}.Zip() // the empty module, which TestCompiledCache expects
		d := digest.FromBytes(blob)
		w.digests[name] = d
		desc := fstore.Descriptor{Name: n, Version: "1.0.0", Platform: ref.PlatformAny, Digest: d, Size: int64(len(blob)), Title: n.Name + "-1.0.0.mur.zip"}
		if err := layout.Push(ctx, desc, bytes.NewReader(blob)); err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, pull.Request{Asked: name, Name: n, Version: "1.0.0"})
	}
	// The project gets its lock, blobs and tools/ the way a user's would: by a pull.
	if _, err := w.repairer().Pull(ctx, w.proj, reqs); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *verifyWorld) repairer() *fetch.Puller {
	return &fetch.Puller{Puller: &pull.Puller{CAS: w.cas, Stores: []fstore.Store{w.layout}}}
}

func (w *verifyWorld) input(t *testing.T) fetch.VerifyInput {
	t.Helper()
	return fetch.VerifyInput{Project: w.proj, Lock: w.readLock(), CAS: w.cas}
}

func (w *verifyWorld) run(t *testing.T, in fetch.VerifyInput) *fetch.VerifyReport {
	t.Helper()
	rep, err := fetch.Verify(w.ctx, in)
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
func problems(rep *fetch.VerifyReport, kind string) []verify.Problem {
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
	es, err := os.ReadDir(filepath.Join(w.cas.Root(), "quarantine"))
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
	w := newVerifyWorld(t)
	d := w.digests["acme/grep"]
	if err := os.Remove(w.cas.Path(d)); err != nil {
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
	if !w.cas.Has(d) {
		t.Fatal("the repaired blob is not in the CAS")
	}
	w.mustBeClean(t)
}

func TestCorruptBlob(t *testing.T) {
	w := newVerifyWorld(t)
	d := w.digests["acme/cat"]
	path := w.cas.Path(d)
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
	if w.cas.Has(d) {
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
	w := newVerifyWorld(t)
	n, _ := ref.ParseName("acme/grep")
	dir := stage.StagedDir(w.proj.Tools(), n)
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
	if err := stage.CheckStaged(w.proj.Tools(), n, w.digests["acme/grep"]); err != nil {
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
	w := newVerifyWorld(t)
	err := lock.Update(w.ctx, w.proj.LockPath(), func(l *lock.Lock) error {
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
	w := newVerifyWorld(t)
	n, _ := ref.ParseName("acme/comp")
	blob := artifacttest.Spec{Name: n.Name, Version: "1.0.0", Wasm: []byte("\x00asm\x0d\x00\x01\x00")}.Zip()
	d := digest.FromBytes(blob)
	desc := fstore.Descriptor{Name: n, Version: "1.0.0", Platform: ref.PlatformAny, Digest: d, Size: int64(len(blob)), Title: "comp-1.0.0.mur.zip"}
	if err := w.layout.Push(w.ctx, desc, bytes.NewReader(blob)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.repairer().Pull(w.ctx, w.proj, []pull.Request{{Asked: "acme/comp", Name: n, Version: "1.0.0"}}); err != nil {
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

func TestAllPlatforms(t *testing.T) {
	host := ref.HostPlatform()
	if host == ref.PlatformAny {
		t.Skip("this machine has no platform tag")
	}
	other := "darwin-aarch64"
	if host == other {
		other = "linux-x86_64"
	}
	w := newVerifyWorld(t)
	n, _ := ref.ParseName("acme/multi")
	pinned := map[string]digest.Digest{}
	for _, plat := range []string{host, other} {
		blob := zipOf("multi", "2.0.0", "built for "+plat)
		d, err := w.cas.Ingest(w.ctx, bytes.NewReader(blob), int64(len(blob)), digest.FromBytes(blob))
		if err != nil {
			t.Fatal(err)
		}
		pinned[plat] = d
	}
	err := lock.Update(w.ctx, w.proj.LockPath(), func(l *lock.Lock) error {
		for plat, d := range pinned {
			if err := l.Upsert(n.String(), "2.0.0", plat, d.Encoded(), "", false); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stage.Stage(w.proj.Tools(), w.cas, n, pinned[host]); err != nil {
		t.Fatal(err)
	}

	in := w.input(t)
	if rep := w.run(t, in); rep.Blobs != 3 || rep.Tools != 3 || len(rep.Problems) != 0 {
		t.Fatalf("host platform: %d blobs %d tools, %+v", rep.Blobs, rep.Tools, rep.Problems)
	}
	in.Platform = "all"
	if rep := w.run(t, in); rep.Blobs != 4 || rep.Tools != 3 || len(rep.Problems) != 0 {
		t.Fatalf("all platforms: %d blobs %d tools, %+v", rep.Blobs, rep.Tools, rep.Problems)
	}

	// Another platform's pins are checked, but tools/ holds this machine's build: it is
	// checked against the host's pin, not reported as staged from the wrong blob.
	in.Platform = other
	if rep := w.run(t, in); rep.Blobs != 3 || rep.Tools != 3 || len(rep.Problems) != 0 {
		t.Fatalf("--platform %s: %d blobs %d tools, %+v", other, rep.Blobs, rep.Tools, rep.Problems)
	}

	// Damage the other platform's blob: only --platform all looks at it.
	path := w.cas.Path(pinned[other])
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("not the pinned bytes"), 0o444); err != nil {
		t.Fatal(err)
	}
	in.Platform = ""
	if rep := w.run(t, in); len(rep.Problems) != 0 {
		t.Fatalf("the host check looked at another platform's blob: %+v", rep.Problems)
	}
	in.Platform = "all"
	rep := w.run(t, in)
	blobs := problems(rep, "blob")
	if len(blobs) != 1 || blobs[0].Subject != "acme/multi "+pinned[other].String() {
		t.Fatalf("all platforms with a damaged %s blob: %+v", other, rep.Problems)
	}
	if w.cas.Has(pinned[other]) {
		t.Error("the damaged blob was not quarantined")
	}
	// Naming the other platform checks its pin alone.
	in.Platform = other
	rep = w.run(t, in)
	if rep.Blobs != 3 || len(problems(rep, "blob")) != 1 {
		t.Fatalf("--platform %s: %d blobs, %+v", other, rep.Blobs, rep.Problems)
	}

	// --repair with a named platform fetches that platform's blob, and tools/ ends up holding
	// this machine's build again.
	otherBlob := zipOf("multi", "2.0.0", "built for "+other)
	desc := fstore.Descriptor{Name: n, Version: "2.0.0", Platform: other, Digest: pinned[other], Size: int64(len(otherBlob)), Title: "multi-2.0.0.mur.zip"}
	if err := w.layout.Push(w.ctx, desc, bytes.NewReader(otherBlob)); err != nil {
		t.Fatal(err)
	}
	in.Repair = w.repairer()
	rep = w.run(t, in)
	if rep.Unrepaired() != 0 || len(problems(rep, "blob")) != 1 || !w.cas.Has(pinned[other]) {
		t.Fatalf("--platform %s --repair: %+v", other, rep.Problems)
	}
	if err := stage.CheckStaged(w.proj.Tools(), n, pinned[host]); err != nil {
		t.Fatalf("tools/ after repairing another platform's blob: %v", err)
	}
	in.Repair, in.Platform = nil, "all"
	if rep := w.run(t, in); len(rep.Problems) != 0 {
		t.Fatalf("after repair: %+v", rep.Problems)
	}
}

// readFails makes the blob d fail every read while it still looks present: a symlink to
// /proc/self/mem (whose reads at offset 0 fail with EIO, as a bad sector's do), which every read
// of a blob now refuses before reading through it.
func readFails(t *testing.T, w *verifyWorld, d digest.Digest) {
	t.Helper()
	path := w.cas.Path(d)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/proc/self/mem", path); err != nil {
		t.Fatal(err)
	}
	if !w.cas.Has(d) || w.cas.Verify(w.ctx, d) == nil {
		t.Skip("this system reads /proc/self/mem at offset 0")
	}
}

// "(repaired)" only once the repaired blob checks out again: a blob that can't be read is moved
// aside and fetched again, rather than found present and called repaired.
func TestRepairOfAnUnreadableBlob(t *testing.T) {
	w := newVerifyWorld(t)
	d := w.digests["acme/grep"]
	readFails(t, w, d)
	rep := w.run(t, w.input(t))
	if blobs := problems(rep, "blob"); len(blobs) != 1 || blobs[0].Repaired || !strings.Contains(blobs[0].Problem, "is a symlink, not a regular file") {
		t.Fatalf("an unreadable blob: %+v", rep.Problems)
	}
	in := w.input(t)
	in.Repair = w.repairer()
	rep = w.run(t, in)
	if blobs := problems(rep, "blob"); len(blobs) != 1 || !blobs[0].Repaired || rep.Err(true) != nil {
		t.Fatalf("repair of an unreadable blob: %+v", rep.Problems)
	}
	if err := w.cas.Verify(w.ctx, d); err != nil {
		t.Fatalf("reported repaired, but the blob still fails: %v", err)
	}
	w.mustBeClean(t)
}

// A repair whose fetch succeeds but whose blob still does not check out is not repaired.
func TestRepairIsCheckedAgain(t *testing.T) {
	w := newVerifyWorld(t)
	d := w.digests["acme/grep"]
	os.Remove(w.cas.Path(d))
	in := w.input(t)
	in.Repair = w.repairer()
	// Right after the blob is committed, the disk gives way under it.
	in.Repair.Compile.Precompile = func(ctx context.Context, wasm []byte) error {
		os.Remove(w.cas.Path(d))
		os.Symlink("/proc/self/mem", w.cas.Path(d))
		return nil
	}
	rep := w.run(t, in)
	blobs := problems(rep, "blob")
	if len(blobs) != 1 || blobs[0].Repaired || !strings.Contains(blobs[0].Problem, "still does not check out") {
		t.Fatalf("a repair whose blob fails again: %+v", rep.Problems)
	}
}

// noManifest is a zip of wasm alone: it reads, but as no packed artifact.
func noManifest(t *testing.T, wasm []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	f, err := zw.Create("capsule.wasm")
	if err != nil {
		t.Fatal(err)
	}
	f.Write(wasm)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// A blob that hashes to its name but is not a valid artifact is named as such, with the reason,
// and no repair is attempted: the pinned bytes are what is wrong.
func TestPlantedBlobIsNotAnArtifact(t *testing.T) {
	wasm := artifacttest.Module(1000, 7)
	for name, c := range map[string]struct {
		blob   []byte
		reason string
	}{
		"not a zip": {[]byte("planted by hand, not a zip"), "not a readable zip"},
		// A payload that is not what its zip records is refused where a blob is admitted
		// (TestImportRefusesAnArtifactWhosePayloadLies); verify reads no entry.
		"no murmur.yaml": {noManifest(t, wasm), "no murmur.yaml"},
	} {
		t.Run(name, func(t *testing.T) {
			w := newVerifyWorld(t)
			d, err := w.cas.Ingest(w.ctx, bytes.NewReader(c.blob), -1, "")
			if err != nil {
				t.Fatal(err)
			}
			lock.Update(w.ctx, w.proj.LockPath(), func(l *lock.Lock) error {
				return l.Upsert("acme/planted", "1.0.0", "any", d.Encoded(), "", false)
			})
			in := w.input(t)
			store := &openCounter{Store: w.layout}
			in.Repair = &fetch.Puller{Puller: &pull.Puller{CAS: w.cas, Stores: []fstore.Store{store}}}
			rep := w.run(t, in)
			blobs := problems(rep, "blob")
			if len(blobs) != 1 || blobs[0].Repaired || !strings.Contains(blobs[0].Problem, "not a valid artifact") ||
				!strings.Contains(blobs[0].Problem, c.reason) || !strings.Contains(blobs[0].Problem, "--update") {
				t.Fatalf("a planted blob: %+v", rep.Problems)
			}
			if store.opens.Load() != 0 {
				t.Fatal("the repair fetched bytes that can only be the same invalid ones")
			}
			if !w.cas.Has(d) {
				t.Fatal("the planted blob went; it hashes right and is what the lock pins")
			}
		})
	}
}

// A repair that can reach no store or source says so, names --store, and the verdict does not
// send the user back to --repair.
func TestRepairWithNothingToAsk(t *testing.T) {
	w := newVerifyWorld(t)
	d := w.digests["acme/grep"]
	os.Remove(w.cas.Path(d))
	in := w.input(t)
	in.Repair = &fetch.Puller{Puller: &pull.Puller{CAS: w.cas}}
	rep := w.run(t, in)
	blobs := problems(rep, "blob")
	if len(blobs) != 1 || blobs[0].Repaired || !strings.Contains(blobs[0].Problem, "not repaired") || !strings.Contains(blobs[0].Problem, "--store") {
		t.Fatalf("a repair with no store: %+v", rep.Problems)
	}
	err := rep.Err(true)
	if err == nil || strings.Contains(err.Error(), "run 'mur verify --repair'") || !strings.Contains(err.Error(), "could not be repaired") {
		t.Fatalf("the verdict after a failed repair: %v", err)
	}
	if err := rep.Err(false); err == nil || !strings.Contains(err.Error(), "--repair") {
		t.Fatalf("the verdict without --repair: %v", err)
	}
	// Offline, the same, with the network named.
	in.Repair = &fetch.Puller{Puller: &pull.Puller{CAS: w.cas, Stores: []fstore.Store{networked(w.layout)}, Offline: true}}
	if blobs := problems(w.run(t, in), "blob"); len(blobs) != 1 || blobs[0].Repaired || !strings.Contains(blobs[0].Problem, "network") {
		t.Fatalf("an offline repair: %+v", blobs)
	}
}

// TestRepairNeverThroughASymlink: verify reports a tools/<scope> that is a symlink, and
// --repair leaves it, and what it points at, alone instead of removing and restaging there.
func TestRepairNeverThroughASymlink(t *testing.T) {
	w := newVerifyWorld(t)
	scopeDir := filepath.Join(w.proj.ToolsDir(), "acme")
	outside := filepath.Join(t.TempDir(), "acme")
	if err := os.Rename(scopeDir, outside); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "grep", "capsule.wasm"), []byte("someone else's file"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, scopeDir); err != nil {
		t.Fatal(err)
	}
	before := treeDigest(t, outside)
	in := w.input(t)
	in.Repair = w.repairer()
	rep := w.run(t, in)
	tools := problems(rep, "tools")
	if len(tools) != 2 || rep.RepairedCount() != 0 {
		t.Fatalf("want two unrepaired tools problems, got %+v", rep.Problems)
	}
	for _, p := range tools {
		if !strings.Contains(p.Problem, scopeDir+" is a symlink to "+outside) {
			t.Errorf("the problem does not name the symlink and its target: %s", p.Problem)
		}
	}
	if after := treeDigest(t, outside); after != before {
		t.Errorf("--repair changed the symlink's target:\n--- before\n%s\n--- after\n%s", before, after)
	}
}
