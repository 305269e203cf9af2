// Package pulltest is the world the pipeline's tests, and the tests of the verbs above it, pull
// in: a project with a CAS of its own, stores to serve it, and packed artifacts built in memory.
// Its pulls pin through PinLock, murmur.lock written as the lock package writes it, with none of
// fetch's transition (no pruning, no declaring in murmur.yaml): a verb's test that means the
// transition pulls through fetch's Puller instead.
package pulltest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
	"github.com/murmur-nexus/mur/internal/bufpool"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/internal/slowdown"
	"github.com/murmur-nexus/mur/lock"
)

// Seed is the artifact Seeded pulls.
var Seed = ref.Name{Scope: "acme", Name: "seed"}

// Packed is a packed artifact in memory.
type Packed struct {
	Zip  []byte
	Wasm []byte
	YAML string
}

func (p Packed) Digest() digest.Digest { return digest.FromBytes(p.Zip) }

// Pack builds the .mur.zip of name@version whose payload is a module made from seed.
func Pack(t testing.TB, name, version string, seed uint64) Packed {
	t.Helper()
	return PackAs(t, name, version, "capsule.wasm", seed)
}

// PackAs is Pack with the payload's file name chosen.
func PackAs(t testing.TB, name, version, payloadFile string, seed uint64) Packed {
	t.Helper()
	spec := artifacttest.Spec{Name: name, Version: version, Payload: payloadFile, Wasm: artifacttest.Module(2000, seed)}
	return Packed{Zip: spec.Zip(), Wasm: spec.Wasm, YAML: spec.Manifest()}
}

// Push publishes p to st as n@version for platform.
func Push(t testing.TB, st store.Store, n ref.Name, version, platform string, p Packed) store.Descriptor {
	t.Helper()
	d := store.Descriptor{Name: n, Version: version, Platform: platform, Digest: p.Digest(), Size: int64(len(p.Zip)), Title: n.Name + "-" + version + ".mur.zip"}
	if err := st.Push(context.Background(), d, bytes.NewReader(p.Zip)); err != nil {
		t.Fatalf("push %s@%s %s: %v", n, version, platform, err)
	}
	return d
}

// BuffersBack waits until bufpool has back every large buffer that was out at base, failing if
// one never comes: a pull that drops one loses its memory for the process's life. A download's
// read-ahead gives its buffers back just after the download, hence the wait.
func BuffersBack(t testing.TB, base int64) {
	t.Helper()
	deadline := time.Now().Add(slowdown.Scale(30 * time.Second))
	for bufpool.Lent() != base {
		if time.Now().After(deadline) {
			t.Fatalf("%d large buffers never came back to the pool", bufpool.Lent()-base)
		}
		time.Sleep(time.Millisecond)
	}
}

// PushMany pushes acme/<prefix>0 … <prefix>N-1 at 1.0.0, each packed from its own seed (with a
// stored payload of about size bytes when size > 0), and returns the requests that pull them.
func PushMany(t testing.TB, st store.Store, prefix string, n, size int, seed uint64) []pull.Request {
	t.Helper()
	var reqs []pull.Request
	for i := range n {
		name := ref.Name{Scope: "acme", Name: fmt.Sprintf("%s%d", prefix, i)}
		p := Pack(t, name.Name, "1.0.0", seed+uint64(i))
		if size > 0 {
			p = PackSized(t, name.Name, "1.0.0", size, seed+uint64(i))
		}
		Push(t, st, name, "1.0.0", "any", p)
		reqs = append(reqs, Req(name, "1.0.0"))
	}
	return reqs
}

// OpenStore opens the store at addr.
func OpenStore(t testing.TB, addr string, opt ocistore.Options) store.Store {
	t.Helper()
	st, err := ocistore.Open(addr, opt)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// LayoutStore is an empty OCI layout store of the test's own.
func LayoutStore(t testing.TB) store.Store {
	return OpenStore(t, "oci-layout:"+filepath.Join(t.TempDir(), "store"), ocistore.Options{})
}

// Req is the request that pulls n@version.
func Req(n ref.Name, version string) pull.Request {
	return pull.Request{Asked: n.String() + "@" + version, Name: n, Version: version}
}

// World is a project and a CAS of its own.
type World struct {
	T    testing.TB
	Proj pull.Project
	CAS  *cas.Store
}

// NewWorld is an empty project beside a home whose CAS is empty.
func NewWorld(t testing.TB) *World {
	t.Helper()
	root := t.TempDir()
	proj := filepath.Join(root, "project")
	if err := os.Mkdir(proj, 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := cas.Open(filepath.Join(root, "home", "cas"))
	if err != nil {
		t.Fatal(err)
	}
	return &World{T: t, Proj: pull.Project{Dir: proj}, CAS: s}
}

// Puller pulls for linux-x86_64 whatever the host is, so that "any" and platform cases are the
// same on every machine, and pins through PinLock.
func (w *World) Puller(stores ...store.Store) *pull.Puller {
	return &pull.Puller{CAS: w.CAS, Stores: stores, Platform: "linux-x86_64", Lock: PinLock}
}

// PinLock is the plain lock writer: it applies the pipeline's pins to the project's murmur.lock
// through the lock package, and nothing else, so that the pipeline's tests assert the lock's
// content without fetch's transition.
func PinLock(ctx context.Context, proj pull.Project, pin func(*lock.Lock) error) error {
	return lock.Update(ctx, proj.LockPath(), pin)
}

// Pull pulls reqs into the world's project with p.
func (w *World) Pull(p *pull.Puller, reqs ...pull.Request) ([]pull.Result, error) {
	return p.Pull(context.Background(), w.Proj, reqs)
}

// MustPull is Pull, failing the test on an error.
func (w *World) MustPull(p *pull.Puller, reqs ...pull.Request) []pull.Result {
	w.T.Helper()
	res, err := w.Pull(p, reqs...)
	if err != nil {
		w.T.Fatalf("pull: %v", err)
	}
	return res
}

// State is everything a failed pull must leave alone.
type State struct {
	Blobs  string
	Ingest int    // temporary files
	Kept   int    // downloads kept for the next pull to continue
	Lock   string // "<absent>" when there is none
	Tools  string
}

// State is what the world holds now.
func (w *World) State() State {
	w.T.Helper()
	var s State
	ents, err := os.ReadDir(filepath.Join(w.CAS.Root(), "blobs", "sha256"))
	if err != nil {
		w.T.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	s.Blobs = strings.Join(names, ",")
	ing, _ := os.ReadDir(filepath.Join(w.CAS.Root(), "ingest"))
	for _, e := range ing {
		switch {
		case strings.HasPrefix(e.Name(), "resume-") && !strings.HasSuffix(e.Name(), ".json"):
			s.Kept++
		case !strings.HasPrefix(e.Name(), "resume-"):
			s.Ingest++
		}
	}
	if b, err := os.ReadFile(w.Proj.LockPath()); err == nil {
		s.Lock = string(b)
	} else if errors.Is(err, fs.ErrNotExist) {
		s.Lock = "<absent>"
	} else {
		w.T.Fatal(err)
	}
	s.Tools = TreeDigest(w.T, w.Proj.ToolsDir())
	return s
}

// TreeDigest lists every file under dir with its mode and content hash; "<absent>" when dir is
// missing.
func TreeDigest(t testing.TB, dir string) string {
	t.Helper()
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return "<absent>"
	}
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		line := rel + " " + info.Mode().String()
		if info.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			line += " " + hex.EncodeToString(sum[:])
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// AssertUnchanged checks that the world holds what it held before, with no temporary file left.
func (w *World) AssertUnchanged(before State) {
	w.T.Helper()
	after := w.State()
	if after.Blobs != before.Blobs {
		w.T.Errorf("the CAS blobs changed: before [%s], after [%s]", before.Blobs, after.Blobs)
	}
	if after.Ingest != 0 {
		w.T.Errorf("%d temporary files left in cas/ingest", after.Ingest)
	}
	if after.Kept != before.Kept {
		w.T.Errorf("%d downloads kept in cas/ingest for a later pull, want %d", after.Kept, before.Kept)
	}
	if after.Lock != before.Lock {
		w.T.Errorf("murmur.lock changed:\n--- before\n%s\n--- after\n%s", before.Lock, after.Lock)
	}
	if after.Tools != before.Tools {
		w.T.Errorf("tools/ changed:\n--- before\n%s\n--- after\n%s", before.Tools, after.Tools)
	}
}

// AssertKept is AssertUnchanged for a failure that says nothing against the bytes received: they
// are kept, once, for the next pull to continue.
func (w *World) AssertKept(before State) {
	w.T.Helper()
	before.Kept++
	w.AssertUnchanged(before)
}

// Records are the CAS's pull records, oldest first.
func (w *World) Records() []cas.Record {
	w.T.Helper()
	rs, err := w.CAS.Records("")
	if err != nil {
		w.T.Fatal(err)
	}
	return rs
}

// AssertFailedRecord checks that the last pull record is a failure of name carrying tok.
func (w *World) AssertFailedRecord(n ref.Name, tok errs.Token) {
	w.T.Helper()
	rs := w.Records()
	if len(rs) == 0 {
		w.T.Fatal("no pull record")
	}
	r := rs[len(rs)-1]
	if r.Outcome != cas.OutcomeFailed || r.Name != n.String() || !strings.Contains(r.Error, string(tok)) {
		w.T.Errorf("last record %+v, want a failed record of %s with %s", r, n, tok)
	}
}

// Seeded pulls acme/seed@1.0.0 from st, so that a later failure has a lock, a blob and a tools/
// folder it must not touch.
func (w *World) Seeded(st store.Store) State {
	w.T.Helper()
	Push(w.T, st, Seed, "1.0.0", "any", Pack(w.T, "seed", "1.0.0", 999))
	w.MustPull(w.Puller(st), Req(Seed, "1.0.0"))
	return w.State()
}

// FaultyAddr is the store address of f's registrytest.
func FaultyAddr(f *registrytest.Faulty) string { return "oci://" + f.Addr() + "/murmur" }

// FaultyStore opens f's registry as a store.
func FaultyStore(t testing.TB, f *registrytest.Faulty, opt ocistore.Options) store.Store {
	return OpenStore(t, FaultyAddr(f), opt)
}

// Ingest puts p into the world's CAS without a pull.
func (w *World) Ingest(p Packed) digest.Digest {
	w.T.Helper()
	d, err := w.CAS.Ingest(context.Background(), bytes.NewReader(p.Zip), int64(len(p.Zip)), p.Digest())
	if err != nil {
		w.T.Fatal(err)
	}
	return d
}

// ReadLock reads the project's murmur.lock.
func (w *World) ReadLock() *lock.Lock {
	w.T.Helper()
	l, err := lock.Read(w.Proj.LockPath())
	if err != nil {
		w.T.Fatal(err)
	}
	return l
}

// PinAll writes pins into the project's murmur.lock, as a lock committed by a teammate would be.
func (w *World) PinAll(pins []Pin) {
	w.T.Helper()
	err := lock.Update(context.Background(), w.Proj.LockPath(), func(l *lock.Lock) error {
		for _, p := range pins {
			if err := l.Upsert(p.Name, p.Version, p.Platform, p.Digest().Encoded(), "", false); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		w.T.Fatal(err)
	}
}

// Pin is one blob a test serves and pins.
type Pin struct {
	Name, Version, Platform string
	Blob                    []byte
}

func (p Pin) Digest() digest.Digest { return digest.FromBytes(p.Blob) }

// PushPin publishes p's blob to st under its name, version and platform.
func PushPin(t testing.TB, st store.Store, p Pin) {
	t.Helper()
	n, err := ref.ParseName(p.Name)
	if err != nil {
		t.Fatal(err)
	}
	Push(t, st, n, p.Version, p.Platform, Packed{Zip: p.Blob})
}

// ZipOf builds a packed artifact whose payload is tagged with its name; description makes two
// builds of one version differ.
func ZipOf(name, version, description string) []byte {
	return artifacttest.Spec{Name: name, Version: version, Description: description, Wasm: artifacttest.Tagged(name)}.Zip()
}

// Networked is st as a store across the network: a layout stands in for a registry in tests
// that need the network to be off, since a pull with the network off still reads layouts.
func Networked(st store.Store) store.Store { return networkedStore{st} }

type networkedStore struct{ store.Store }

func (n networkedStore) String() string { return "oci://stand-in.invalid/" + n.Store.String() }

// PackSized is Pack with a payload of about size bytes, which the zip stores as they are.
func PackSized(t testing.TB, name, version string, size int, seed uint64) Packed {
	t.Helper()
	spec := artifacttest.Spec{Name: name, Version: version, Wasm: artifacttest.Module(size, seed)}
	return Packed{Zip: spec.Zip(), Wasm: spec.Wasm, YAML: spec.Manifest()}
}

// PulledPair pushes acme/cat and acme/grep at 1.0.0, each the empty module, to a layout store and
// pulls both into w's project for this machine, the way a user's project gets its lock, blobs and
// tools/: the layout, and the digests by artifact name.
func (w *World) PulledPair() (store.Store, map[string]digest.Digest) {
	w.T.Helper()
	layout := LayoutStore(w.T)
	digests := map[string]digest.Digest{}
	var reqs []pull.Request
	for _, name := range []string{"acme/cat", "acme/grep"} {
		n, _ := ref.ParseName(name)
		p := Packed{Zip: artifacttest.Spec{Name: n.Name, Version: "1.0.0"}.Zip()}
		digests[name] = Push(w.T, layout, n, "1.0.0", ref.PlatformAny, p).Digest
		reqs = append(reqs, pull.Request{Asked: name, Name: n, Version: "1.0.0"})
	}
	pl := w.Puller(layout)
	pl.Platform = "" // this machine's, whose tools/ verify checks
	w.MustPull(pl, reqs...)
	return layout, digests
}
