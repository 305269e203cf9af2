package e2e

import (
	"crypto/sha256"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
	"github.com/murmur-nexus/mur/sandbox/guesttest"
)

// TestFailedPullChangesNothing: a payload whose CRC-32 is not what its zip records (stored, so
// that no inflate would notice) fails the pull, from a file and through a layout store, with no
// blob, no lock entry and no tools/.
func TestFailedPullChangesNothing(t *testing.T) {
	t.Parallel()
	wasm := artifacttest.Module(64<<10, 5)
	bad := artifacttest.Spec{Name: "bad", Version: "1.0.0", Wasm: wasm}.Lying(true, crc32.ChecksumIEEE(wasm)^1, uint64(len(wasm)))
	w := newWorld(t)
	path := filepath.Join(t.TempDir(), "bad-1.0.0.mur.zip")
	os.WriteFile(path, bad, 0o644)
	r := w.fails("invalid-artifact", "pull", path)
	if !strings.Contains(r.stderr, "checksum") {
		t.Fatalf("the error does not say what is wrong: %s", r.stderr)
	}
	w.assertUnchanged(0, "")
	store := "oci-layout:" + filepath.Join(t.TempDir(), "store")
	w.ok("push", path, "--scope", "e2e", "--store", store)
	w.stores(store)
	w.write("murmur.yaml", capsuleYAML("e2e/bad@1.0.0"))
	w.fails("invalid-artifact", "pull")
	w.assertUnchanged(0, "")
}

// TestPushOutsideAProject mirrors what the CAS holds from its pull records.
func TestPushOutsideAProject(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	store := "oci-layout:" + filepath.Join(t.TempDir(), "store")
	mirror := "oci-layout:" + filepath.Join(t.TempDir(), "mirror")
	f := artifacttest.File(t, t.TempDir(), "x", "1.0.0", []byte(artifacttest.EmptyModule))
	w.ok("push", f, "--scope", "acme", "--store", store)
	w.stores(store)
	// The folder has no murmur.yaml: the pull fills the CAS and the records, and writes nothing
	// there, saying where the blob is.
	r := w.ok("pull", "--no-precompile", "acme/x@1.0.0")
	data, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	hex := fmt.Sprintf("%x", sha256.Sum256(data))
	if !strings.Contains(r.stdout, filepath.Join("cas", "blobs", "sha256", hex)) {
		t.Fatalf("a pull outside a project does not say where the blob is: %s", r)
	}
	for _, name := range []string{"murmur.lock", ".murmur.lock.lck", "tools"} {
		if _, err := os.Lstat(filepath.Join(w.project, name)); err == nil {
			t.Fatalf("a pull outside a project wrote %s", name)
		}
	}
	if r := w.elsewhere("push", "acme/x@1.0.0", "--store", mirror); r.code != 0 || !strings.Contains(r.stdout, "pushed acme/x@1.0.0") {
		t.Fatalf("push outside a project: %s", r)
	}
	// The mirror serves it: a fresh project pulls it from there, with the same digest.
	other := w.sibling("other")
	other.stores(mirror)
	other.write("murmur.yaml", capsuleYAML("acme/x@1.0.0"))
	other.ok("pull", "--no-precompile")
	if other.lock().Find("acme/x").SHA256.Any != hex {
		t.Fatal("the mirror serves another digest")
	}
	if r := w.elsewhere("push", "acme/never@1.0.0", "--store", mirror); r.code != 1 || !strings.Contains(r.stderr, "mur: not-found:") {
		t.Fatalf("push of something never pulled: %s", r)
	}
}

func TestNetworkTimeoutIsChecked(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.write("murmur.yaml", capsuleYAML("acme/x@1.0.0"))
	for _, v := range []string{"abc", "-5s", "0", "30"} {
		w.env = append(w.env, "MUR_NETWORK_TIMEOUT="+v)
		r := w.mur("pull")
		if r.code != 2 || !strings.Contains(r.stderr, "mur: usage: MUR_NETWORK_TIMEOUT") || !strings.Contains(r.stderr, fmt.Sprintf("%q", v)) {
			t.Errorf("MUR_NETWORK_TIMEOUT=%s: %s", v, r)
		}
		w.env = w.env[:len(w.env)-1]
	}
}

// TestVerifyTellsTheTruth: a blob that can't be read is repaired for real, a planted blob that
// is not an artifact is named as one, and a repair that can reach no store says so.
func TestVerifyTellsTheTruth(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.seedCompiled() // the guest runs here for what it does (compiled_seed_test.go)
	storeDir := filepath.Join(t.TempDir(), "store")
	f := artifacttest.File(t, t.TempDir(), "hello", "1.0.0", guesttest.Build(t, "hello"))
	w.ok("push", f, "--scope", "e2e", "--store", "oci-layout:"+storeDir)
	w.write("murmur.yaml", capsuleYAML("e2e/hello@1.0.0"))
	w.ok("pull", "--store", "oci-layout:"+storeDir)
	blob := w.pinned("e2e/hello")
	unreadable := func() {
		os.Remove(blob)
		// Reads of /proc/self/mem at offset 0 fail with EIO, as a bad sector does, even for root.
		if err := os.Symlink("/proc/self/mem", blob); err != nil {
			t.Fatal(err)
		}
	}

	// No store to repair from: nothing is called repaired, and the reason names --store.
	unreadable()
	r := w.mur("verify", "--repair")
	if r.code != 1 || strings.Contains(r.stdout, "(repaired)") || !strings.Contains(r.stdout, "not repaired") ||
		!strings.Contains(r.stdout, "--store") || strings.Contains(r.stderr, "run 'mur verify --repair'") {
		t.Fatalf("verify --repair without a store: %s", r)
	}
	// With the store: the blob is fetched again, and verify agrees.
	unreadable()
	r = w.ok("verify", "--repair", "--store", "oci-layout:"+storeDir)
	if !strings.Contains(r.stdout, "(repaired)") {
		t.Fatalf("verify --repair with a store: %s", r)
	}
	w.ok("verify")
	w.ok("run", "hello")

	// A planted blob that hashes right but is no artifact.
	planted := []byte("planted by hand: not a zip")
	d := fmt.Sprintf("%x", sha256Sum(planted))
	os.WriteFile(filepath.Join(w.home, "cas", "blobs", "sha256", d), planted, 0o444)
	lock := w.lockBytes()
	w.write("murmur.lock", strings.Replace(lock, "artifacts:\n", "artifacts:\n  - name: e2e/planted\n    resolved_version: 1.0.0\n    sha256:\n      any: "+d+"\n    origin: operator\n", 1))
	r = w.mur("verify", "--repair", "--store", "oci-layout:"+storeDir)
	if r.code != 1 || !strings.Contains(r.stdout, "not a valid artifact") || !strings.Contains(r.stdout, "not a readable zip") || strings.Contains(r.stdout, "(repaired)") {
		t.Fatalf("verify of a planted blob: %s", r)
	}
}

func sha256Sum(b []byte) [32]byte { return sha256.Sum256(b) }
