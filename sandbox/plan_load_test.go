//go:build unix

package sandbox

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/internal/artifact"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
)

func TestOpenCreatesAndHolds(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	c := w.capsule(t, capsuleYAML(fullCaps))
	p, err := BuildPlan(w.input(c, "grep"))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ { // again: open is idempotent
		fsys, err := p.open()
		if err != nil {
			t.Fatal(err)
		}
		fsys.Close()
	}
	for _, o := range append(append([]Mount(nil), p.Preopens...), p.Subtrees...) {
		fi, err := os.Stat(o.HostPath)
		if err != nil || !fi.IsDir() {
			t.Fatalf("%s: %v", o.HostPath, err)
		}
	}
	for _, dir := range []string{filepath.Join(w.home, "state"), filepath.Join(w.home, "state", "demo")} {
		fi, err := os.Stat(dir)
		if err != nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("%s: %v %v, want a 0700 folder", dir, fi, err)
		}
	}
	// A store loosened by hand is tightened again.
	store := filepath.Join(w.home, "state", "demo")
	if err := os.Chmod(store, 0o755); err != nil {
		t.Fatal(err)
	}
	fsys, err := p.open()
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	if fi, _ := os.Stat(store); fi.Mode().Perm() != 0o700 {
		t.Fatalf("state store is %v after open, want 0700", fi.Mode().Perm())
	}
	// What is held is what is written to, whatever happens to the paths afterwards.
	work := p.Preopens[0].HostPath
	outside := filepath.Join(w.root, "outside")
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(work, work+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, work); err != nil {
		t.Fatal(err)
	}
	f, e := fsys.OpenFile("held.txt", experimentalsys.O_WRONLY|experimentalsys.O_CREAT, 0o644)
	if e != 0 {
		t.Fatal(e)
	}
	f.Close()
	if _, err := os.Stat(filepath.Join(work+".moved", "held.txt")); err != nil {
		t.Errorf("the write did not land in the folder that was opened: %v", err)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("the write followed the path to %v", ents)
	}
}

// packed builds a packed artifact holding wasm.
func packed(t *testing.T, name, version string, wasm []byte) []byte {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "murmur.yaml"), []byte("name: "+name+"\nversion: \""+version+"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "capsule.wasm"), wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := artifact.Pack(dir, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestLoad(t *testing.T) {
	t.Parallel()
	store, err := cas.Open(filepath.Join(t.TempDir(), "cas"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	wasm := []byte(smallestModule + "\x00\x04\x03abc") // a custom section makes it our own
	blob := packed(t, "grep", "1.0.0", wasm)
	d, err := store.Ingest(ctx, bytes.NewReader(blob), int64(len(blob)), digest.FromBytes(blob))
	if err != nil {
		t.Fatal(err)
	}
	got, a, err := LoadPayload(ctx, store, d, "")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, wasm) || a.Manifest.Name != "grep" || a.Manifest.Version != "1.0.0" {
		t.Fatalf("Load = %q (%+v), want %q", got, a.Manifest, wasm)
	}

	_, _, err = LoadPayload(ctx, store, digest.FromString("never ingested"), "")
	errtest.WantToken(t, err, errs.NotFound)

	path := store.Path(d)
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	tampered := append([]byte(nil), blob...)
	tampered[len(tampered)/2] ^= 0xff
	if err := os.WriteFile(path, tampered, 0o444); err != nil {
		t.Fatal(err)
	}
	got, a, err = LoadPayload(ctx, store, d, "")
	errtest.WantToken(t, err, errs.Integrity)
	if got != nil || a != nil {
		t.Errorf("Load of a tampered blob returned a payload")
	}
	if store.Has(d) {
		t.Errorf("the tampered blob is still in the CAS")
	}
	q, err := os.ReadDir(filepath.Join(store.Root(), "quarantine"))
	if err != nil || len(q) != 1 || !strings.HasPrefix(q[0].Name(), d.Encoded()) {
		t.Fatalf("quarantine holds %v (%v), want the tampered blob", q, err)
	}
}

// TestLoadKeepsPayloads: a kept payload spares the inflate on the next load, and a kept payload
// that no longer matches the verified zip's CRC-32 is inflated again and replaced.
func TestLoadKeepsPayloads(t *testing.T) {
	t.Parallel()
	store, err := cas.Open(filepath.Join(t.TempDir(), "cas"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	wasm := []byte(smallestModule + "\x00\x04\x03xyz")
	blob := packed(t, "grep", "1.0.0", wasm)
	d, err := store.Ingest(context.Background(), bytes.NewReader(blob), int64(len(blob)), digest.FromBytes(blob))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "compiled", "payloads")
	kept := filepath.Join(dir, d.Encoded()+".wasm")
	if got, _, err := LoadPayload(ctx, store, d, dir); err != nil || !bytes.Equal(got, wasm) {
		t.Fatalf("first Load = %q, %v", got, err)
	}
	if b, err := os.ReadFile(kept); err != nil || !bytes.Equal(b, wasm) {
		t.Fatalf("payload not kept: %q, %v", b, err)
	}
	if fi, _ := os.Stat(dir); fi == nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("payload folder mode: %v", fi)
	}
	// A second load uses the kept payload: it is not written again (a rewrite is a rename,
	// so it would be a new inode).
	before, _ := os.Stat(kept)
	if got, _, err := LoadPayload(ctx, store, d, dir); err != nil || !bytes.Equal(got, wasm) {
		t.Fatalf("second Load = %q, %v", got, err)
	}
	if after, _ := os.Stat(kept); !os.SameFile(before, after) {
		t.Fatal("the kept payload was inflated and written again")
	}
	damaged := append([]byte(nil), wasm...)
	damaged[len(damaged)-1] ^= 0xff
	if err := os.WriteFile(kept, damaged, 0o600); err != nil {
		t.Fatal(err)
	}
	got, _, err := LoadPayload(ctx, store, d, dir)
	if err != nil || !bytes.Equal(got, wasm) {
		t.Fatalf("Load with a damaged kept payload = %q, %v; want the zip's payload", got, err)
	}
	if b, _ := os.ReadFile(kept); !bytes.Equal(b, wasm) {
		t.Fatalf("the damaged kept payload was not replaced: %q", b)
	}
	// Truncated too.
	os.WriteFile(kept, wasm[:4], 0o600)
	if got, _, err := LoadPayload(ctx, store, d, dir); err != nil || !bytes.Equal(got, wasm) {
		t.Fatalf("Load with a truncated kept payload = %q, %v", got, err)
	}
	// The blob is still verified first: a tampered blob is refused even with a good payload kept.
	os.Chmod(store.Path(d), 0o644)
	tampered := append([]byte(nil), blob...)
	tampered[len(tampered)/2] ^= 0xff
	os.WriteFile(store.Path(d), tampered, 0o444)
	if _, _, err := LoadPayload(ctx, store, d, dir); !errors.Is(err, errs.Integrity) {
		t.Fatalf("Load of a tampered blob with a kept payload: %v", err)
	}
}

func TestExplain(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	p, err := BuildPlan(w.input(w.capsule(t, capsuleYAML(fullCaps)), "grep"))
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	p.Explain(&sb)
	text := sb.String()
	lines := strings.Split(text, "\n")
	for _, o := range append(append([]Mount(nil), p.Preopens...), p.Subtrees...) {
		mode := "(read-write)"
		switch {
		case o.GuestPath == "/state":
			mode = "(read-write, the state store)"
		case o.ReadOnly:
			mode = "(read-only)"
		}
		found := false
		for _, l := range lines {
			if strings.Contains(l, " "+o.GuestPath+" ") && strings.Contains(l, o.HostPath) && strings.HasSuffix(l, mode) {
				found = true
			}
		}
		if !found {
			t.Errorf("Explain has no line for %s -> %s %s:\n%s", o.GuestPath, o.HostPath, mode, text)
		}
	}
	if n := strings.Count(text, "-> "); n != 5 {
		t.Errorf("Explain shows %d folders, want 5 (/, /state, /a/b, /docs and the state store line):\n%s", n, text)
	}
	for _, want := range []string{
		"acme/grep@1.0.0", "sha256:" + hexGrep,
		"acme/grep: demo -> " + filepath.Join(w.home, "state", "demo"),
		"MUR_T_EMPTY, MUR_T_LANG, MUR_T_UNSET, PWD=/",
		"memory 256 MiB, timeout 1m0s",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("Explain does not mention %q:\n%s", want, text)
		}
	}

	p, err = BuildPlan(w.input(w.capsule(t, capsuleYAML("")), "grep"))
	if err != nil {
		t.Fatal(err)
	}
	sb.Reset()
	p.Explain(&sb)
	for _, want := range []string{"(none granted)", "PWD=/ only", "timeout none", "(read-write)"} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("Explain without grants does not mention %q:\n%s", want, sb.String())
		}
	}
}

// TestPrunePayloads: a kept payload goes with its blob, whether the CAS lost it or gc removes it
// now; in a dry run the blobs gc would remove count as gone too.
func TestPrunePayloads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, err := cas.Open(filepath.Join(t.TempDir(), "cas"))
	if err != nil {
		t.Fatal(err)
	}
	cacheDir := filepath.Join(t.TempDir(), "compiled")
	dir := PayloadDir(cacheDir)
	if gone, err := PrunePayloads(cacheDir, store, cas.GCReport{}, false); err != nil || gone != nil {
		t.Fatalf("missing folder: %v, %v", gone, err)
	}
	keep, err := store.Ingest(ctx, strings.NewReader("keep"), -1, "")
	if err != nil {
		t.Fatal(err)
	}
	doomed, err := store.Ingest(ctx, strings.NewReader("doomed"), -1, "")
	if err != nil {
		t.Fatal(err)
	}
	drop := digest.FromString("never in the CAS")
	os.MkdirAll(dir, 0o700)
	for _, name := range []string{keep.Encoded() + ".wasm", doomed.Encoded() + ".wasm", drop.Encoded() + ".wasm", "junk.tmp"} {
		os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600)
	}
	gc := cas.GCReport{Blobs: []cas.RemovedBlob{{BlobInfo: cas.BlobInfo{Digest: doomed}}}}
	gone, err := PrunePayloads(cacheDir, store, gc, true)
	if err != nil || len(gone) != 3 {
		t.Fatalf("dry run: %v, %v", gone, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 4 {
		t.Fatalf("a dry run removed files: %v", ents)
	}
	if gone, err = PrunePayloads(cacheDir, store, gc, false); err != nil || len(gone) != 3 {
		t.Fatalf("prune: %v, %v", gone, err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 || ents[0].Name() != keep.Encoded()+".wasm" {
		t.Fatalf("left %v, want only the kept blob's payload", ents)
	}
}
