package fetch_test

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
	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	fpull "github.com/murmur-nexus/mur/fetch/pull"
	fstore "github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
	"github.com/murmur-nexus/mur/internal/bufpool"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/internal/slowdown"
	"github.com/murmur-nexus/mur/lock"
)

// The one world of the fetch verbs' tests: a project with a CAS of its own, stores to serve it,
// and packed artifacts built in memory.

var (
	grep = ref.Name{Scope: "acme", Name: "grep"}
	seed = ref.Name{Scope: "acme", Name: "seed"}
)

// packed is a packed artifact in memory.
type packed struct {
	zip  []byte
	wasm []byte
	yaml string
}

func (p packed) digest() digest.Digest { return digest.FromBytes(p.zip) }

// pack builds the .mur.zip of name@version whose payload is a module made from seed.
func pack(t testing.TB, name, version string, seed uint64) packed {
	t.Helper()
	return packAs(t, name, version, "capsule.wasm", seed)
}

// packAs is pack with the payload's file name chosen.
func packAs(t testing.TB, name, version, payloadFile string, seed uint64) packed {
	t.Helper()
	spec := artifacttest.Spec{Name: name, Version: version, Payload: payloadFile, Wasm: artifacttest.Module(2000, seed)}
	return packed{zip: spec.Zip(), wasm: spec.Wasm, yaml: spec.Manifest()}
}

func push(t testing.TB, st fstore.Store, n ref.Name, version, platform string, p packed) fstore.Descriptor {
	t.Helper()
	d := fstore.Descriptor{Name: n, Version: version, Platform: platform, Digest: p.digest(), Size: int64(len(p.zip)), Title: n.Name + "-" + version + ".mur.zip"}
	if err := st.Push(context.Background(), d, bytes.NewReader(p.zip)); err != nil {
		t.Fatalf("push %s@%s %s: %v", n, version, platform, err)
	}
	return d
}

// buffersBack waits until bufpool has back every large buffer that was out at base, failing if
// one never comes: a pull that drops one loses its memory for the process's life. A download's
// read-ahead gives its buffers back just after the download, hence the wait.
func buffersBack(t testing.TB, base int64) {
	t.Helper()
	deadline := time.Now().Add(slowdown.Scale(30 * time.Second))
	for bufpool.Lent() != base {
		if time.Now().After(deadline) {
			t.Fatalf("%d large buffers never came back to the pool", bufpool.Lent()-base)
		}
		time.Sleep(time.Millisecond)
	}
}

// pushMany pushes acme/<prefix>0 … <prefix>N-1 at 1.0.0, each packed from its own seed (with a
// stored payload of about size bytes when size > 0), and returns the requests that pull them.
func pushMany(t testing.TB, st fstore.Store, prefix string, n, size int, seed uint64) []fpull.Request {
	t.Helper()
	var reqs []fpull.Request
	for i := range n {
		name := ref.Name{Scope: "acme", Name: fmt.Sprintf("%s%d", prefix, i)}
		p := pack(t, name.Name, "1.0.0", seed+uint64(i))
		if size > 0 {
			p = packSized(t, name.Name, "1.0.0", size, seed+uint64(i))
		}
		push(t, st, name, "1.0.0", "any", p)
		reqs = append(reqs, req(name, "1.0.0"))
	}
	return reqs
}

func openStore(t testing.TB, addr string, opt ocistore.Options) fstore.Store {
	t.Helper()
	st, err := ocistore.Open(addr, opt)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func layoutStore(t testing.TB) fstore.Store {
	return openStore(t, "oci-layout:"+filepath.Join(t.TempDir(), "store"), ocistore.Options{})
}

func req(n ref.Name, version string) fpull.Request {
	return fpull.Request{Asked: n.String() + "@" + version, Name: n, Version: version}
}

// world is a project and a CAS of its own.
type world struct {
	t    testing.TB
	proj fpull.Project
	cas  *cas.Store
}

func newWorld(t testing.TB) *world {
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
	return &world{t: t, proj: fpull.Project{Dir: proj}, cas: s}
}

// puller pulls for linux-x86_64 whatever the host is, so that "any" and platform cases are the
// same on every machine.
func (w *world) puller(stores ...fstore.Store) *fetch.Puller {
	return &fetch.Puller{Puller: &fpull.Puller{CAS: w.cas, Stores: stores, Platform: "linux-x86_64"}}
}

func (w *world) pull(p *fetch.Puller, reqs ...fpull.Request) ([]fpull.Result, error) {
	return p.Pull(context.Background(), w.proj, reqs)
}

func (w *world) mustPull(p *fetch.Puller, reqs ...fpull.Request) []fpull.Result {
	w.t.Helper()
	res, err := w.pull(p, reqs...)
	if err != nil {
		w.t.Fatalf("pull: %v", err)
	}
	return res
}

// state is everything a failed pull must leave alone.
type state struct {
	blobs  string
	ingest int    // temporary files
	kept   int    // downloads kept for the next pull to continue
	lock   string // "<absent>" when there is none
	tools  string
}

func (w *world) state() state {
	w.t.Helper()
	var s state
	ents, err := os.ReadDir(filepath.Join(w.cas.Root(), "blobs", "sha256"))
	if err != nil {
		w.t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	s.blobs = strings.Join(names, ",")
	ing, _ := os.ReadDir(filepath.Join(w.cas.Root(), "ingest"))
	for _, e := range ing {
		switch {
		case strings.HasPrefix(e.Name(), "resume-") && !strings.HasSuffix(e.Name(), ".json"):
			s.kept++
		case !strings.HasPrefix(e.Name(), "resume-"):
			s.ingest++
		}
	}
	if b, err := os.ReadFile(w.proj.LockPath()); err == nil {
		s.lock = string(b)
	} else if errors.Is(err, fs.ErrNotExist) {
		s.lock = "<absent>"
	} else {
		w.t.Fatal(err)
	}
	s.tools = treeDigest(w.t, w.proj.ToolsDir())
	return s
}

// treeDigest lists every file under dir with its mode and content hash; "<absent>" when dir is
// missing.
func treeDigest(t testing.TB, dir string) string {
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

func (w *world) assertUnchanged(before state) {
	w.t.Helper()
	after := w.state()
	if after.blobs != before.blobs {
		w.t.Errorf("the CAS blobs changed: before [%s], after [%s]", before.blobs, after.blobs)
	}
	if after.ingest != 0 {
		w.t.Errorf("%d temporary files left in cas/ingest", after.ingest)
	}
	if after.kept != before.kept {
		w.t.Errorf("%d downloads kept in cas/ingest for a later pull, want %d", after.kept, before.kept)
	}
	if after.lock != before.lock {
		w.t.Errorf("murmur.lock changed:\n--- before\n%s\n--- after\n%s", before.lock, after.lock)
	}
	if after.tools != before.tools {
		w.t.Errorf("tools/ changed:\n--- before\n%s\n--- after\n%s", before.tools, after.tools)
	}
}

// assertKept is assertUnchanged for a failure that says nothing against the bytes received: they
// are kept, once, for the next pull to continue.
func (w *world) assertKept(before state) {
	w.t.Helper()
	before.kept++
	w.assertUnchanged(before)
}

func (w *world) records() []cas.Record {
	w.t.Helper()
	rs, err := w.cas.Records("")
	if err != nil {
		w.t.Fatal(err)
	}
	return rs
}

// assertFailedRecord checks that the last pull record is a failure of name carrying tok.
func (w *world) assertFailedRecord(n ref.Name, tok errs.Token) {
	w.t.Helper()
	rs := w.records()
	if len(rs) == 0 {
		w.t.Fatal("no pull record")
	}
	r := rs[len(rs)-1]
	if r.Outcome != cas.OutcomeFailed || r.Name != n.String() || !strings.Contains(r.Error, string(tok)) {
		w.t.Errorf("last record %+v, want a failed record of %s with %s", r, n, tok)
	}
}

// seeded pulls acme/seed@1.0.0 from st, so that a later failure has a lock, a blob and a tools/
// folder it must not touch.
func (w *world) seeded(st fstore.Store) state {
	w.t.Helper()
	push(w.t, st, seed, "1.0.0", "any", pack(w.t, "seed", "1.0.0", 999))
	w.mustPull(w.puller(st), req(seed, "1.0.0"))
	return w.state()
}

// faultyAddr is the store address of f's registrytest.
func faultyAddr(f *registrytest.Faulty) string { return "oci://" + f.Addr() + "/murmur" }

func faultyStore(t testing.TB, f *registrytest.Faulty, opt ocistore.Options) fstore.Store {
	return openStore(t, faultyAddr(f), opt)
}

// ingest puts p into the world's CAS without a pull.
func (w *world) ingest(p packed) digest.Digest {
	w.t.Helper()
	d, err := w.cas.Ingest(context.Background(), bytes.NewReader(p.zip), int64(len(p.zip)), p.digest())
	if err != nil {
		w.t.Fatal(err)
	}
	return d
}

// readLock reads the project's murmur.lock.
func (w *world) readLock() *lock.Lock {
	w.t.Helper()
	l, err := lock.Read(w.proj.LockPath())
	if err != nil {
		w.t.Fatal(err)
	}
	return l
}

// pinAll writes pins into the project's murmur.lock, as a lock committed by a teammate would be.
func (w *world) pinAll(pins []pin) {
	w.t.Helper()
	err := lock.Update(context.Background(), w.proj.LockPath(), func(l *lock.Lock) error {
		for _, p := range pins {
			if err := l.Upsert(p.name, p.version, p.platform, p.digest().Encoded(), "", false); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		w.t.Fatal(err)
	}
}

// pin is one blob a test serves and pins.
type pin struct {
	name, version, platform string
	blob                    []byte
}

func (p pin) digest() digest.Digest { return digest.FromBytes(p.blob) }

// pushPin publishes p's blob to store under its name, version and platform.
func pushPin(t testing.TB, store fstore.Store, p pin) {
	t.Helper()
	n, err := ref.ParseName(p.name)
	if err != nil {
		t.Fatal(err)
	}
	push(t, store, n, p.version, p.platform, packed{zip: p.blob})
}

// zipOf builds a packed artifact whose payload is tagged with its name; description makes two
// builds of one version differ.
func zipOf(name, version, description string) []byte {
	return artifacttest.Spec{Name: name, Version: version, Description: description, Wasm: artifacttest.Tagged(name)}.Zip()
}

// networked is st as a store across the network: a layout stands in for a registry in tests
// that need the network to be off, since a pull with the network off still reads layouts.
func networked(st fstore.Store) fstore.Store { return networkedStore{st} }

type networkedStore struct{ fstore.Store }

func (n networkedStore) String() string { return "oci://stand-in.invalid/" + n.Store.String() }
