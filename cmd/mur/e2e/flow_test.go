package e2e

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
	"github.com/murmur-nexus/mur/sandbox/guesttest"
)

// TestPullFromRealRegistry is the newcomer's path: push a packed tool to docker-registry, pull it
// into a fresh project, and find a correct lock, record and tools/ folder.
func TestPullFromRealRegistry(t *testing.T) {
	t.Parallel()
	reg := registrytest.Start(t)
	w := newWorld(t)
	w.seedCompiled() // the guest runs here for what it does (compiled_seed_test.go)
	store := "oci://" + reg.Addr() + "/murmur"
	wasm := guesttest.Build(t, "hello")
	f := artifacttest.File(t, t.TempDir(), "hello", "1.2.0", wasm)
	w.ok("push", f, "--scope", "acme", "--store", store)
	// A second push of the same bytes is a no-op; other bytes under the same version are refused.
	w.ok("push", f, "--scope", "acme", "--store", store)
	other := artifacttest.File(t, t.TempDir(), "hello", "1.2.0", append(append([]byte{}, wasm...), 0, 1, 2))
	w.fails("lock-conflict", "push", other, "--scope", "acme", "--store", store)

	w.stores(store)
	w.write("murmur.yaml", capsuleYAML("acme/hello@1.2.0"))
	r := w.ok("--json", "pull")
	var out struct {
		Results []struct {
			Name, Version, Digest, Origin string
			CacheHit                      bool `json:"cache_hit"`
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || len(out.Results) != 1 {
		t.Fatalf("pull --json: %v\n%s", err, r)
	}
	got := out.Results[0]
	if got.Name != "acme/hello" || got.Version != "1.2.0" || got.CacheHit || !strings.HasPrefix(got.Origin, "oci://") {
		t.Fatalf("result %+v", got)
	}
	l := w.lock()
	e := l.Find("acme/hello")
	if e == nil || "sha256:"+e.SHA256.Any != got.Digest || e.ResolvedVersion != "1.2.0" {
		t.Fatalf("lock:\n%s", w.lockBytes())
	}
	if fileDigest(t, f) != got.Digest {
		t.Fatalf("pinned %s, but the packed file is %s", got.Digest, fileDigest(t, f))
	}
	staged := filepath.Join(w.project, "tools", "acme", "hello")
	if b, err := os.ReadFile(filepath.Join(staged, "capsule.wasm")); err != nil || len(b) != len(wasm) {
		t.Fatalf("tools/acme/hello/capsule.wasm: %v", err)
	}
	if fi, err := os.Lstat(filepath.Join(staged, "capsule.wasm")); err != nil || fi.Mode()&fs.ModeSymlink != 0 {
		t.Fatal("staged payload is not a plain copy")
	}
	recs := w.ok("cache", "records", "--json", "--digest", got.Digest)
	if !strings.Contains(recs.stdout, `"pulled"`) || !strings.Contains(recs.stdout, store) {
		t.Fatalf("records: %s", recs)
	}
	// The same pull again is a cache hit that the records show too.
	r = w.ok("--json", "pull")
	if !strings.Contains(r.stdout, `"cache_hit": true`) {
		t.Fatalf("second pull: %s", r)
	}
	if recs := w.ok("cache", "records", "--json"); !strings.Contains(recs.stdout, `"cache-hit"`) {
		t.Fatalf("records after a cache hit: %s", recs)
	}
	// And the tool runs.
	if r := w.ok("run", "hello", "--", "one", "two"); !strings.Contains(r.stdout, "arg one\narg two") {
		t.Fatalf("run: %s", r)
	}
}

// TestRegistryUnreachable names the registry and changes nothing.
func TestRegistryUnreachable(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.stores("oci://127.0.0.1:1/murmur")
	w.write("murmur.yaml", capsuleYAML("acme/hello@1.0.0"))
	r := w.fails("network", "pull")
	if !strings.Contains(r.stderr, "127.0.0.1:1") {
		t.Fatalf("the error does not name the registry: %s", r.stderr)
	}
	w.assertUnchanged(0, "")
}

// TestRunStateAndExplain: state persists across runs in the capsule's store, --explain-scope
// prints what a launch opens and changes nothing, and a run never uses tools/.
func TestRunStateAndExplain(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.seedCompiled() // the guest runs here for what it does (compiled_seed_test.go)
	store := "oci-layout:" + filepath.Join(t.TempDir(), "store")
	f := artifacttest.File(t, t.TempDir(), "state", "1.0.0", guesttest.Build(t, "state"))
	w.ok("push", f, "--scope", "acme", "--store", store)
	w.stores(store)
	w.write("murmur.yaml", capsuleYAML("acme/state@1.0.0"))
	w.ok("pull")

	before := snapshot(t, filepath.Dir(w.project))
	r := w.ok("run", "--explain-scope", "state")
	after := snapshot(t, filepath.Dir(w.project))
	if before != after {
		t.Fatalf("--explain-scope changed the file system:\n--- before\n%s\n--- after\n%s", before, after)
	}
	storeDir := filepath.Join(w.home, "state", "e2e-capsule")
	for _, want := range []string{"acme/state", "/state", storeDir, filepath.Join(w.project, "workdir")} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("--explain-scope does not mention %q:\n%s", want, r.stdout)
		}
	}
	js := w.ok("run", "--explain-scope", "--json", "state")
	type mount struct {
		Guest, Host string
		ReadOnly    bool `json:"read_only"`
	}
	var plan struct{ Preopens, Subtrees []mount }
	if err := json.Unmarshal([]byte(js.stdout), &plan); err != nil || len(plan.Preopens) != 1 || plan.Preopens[0].Guest != "/" {
		t.Fatalf("--explain-scope --json: %v\n%s", err, js)
	}
	if len(plan.Subtrees) != 1 || plan.Subtrees[0] != (mount{Guest: "/state", Host: storeDir}) {
		t.Fatalf("--explain-scope --json routes %+v, want the store at /state\n%s", plan.Subtrees, js)
	}

	// Damage the staged copy: run must not care, because it loads from the CAS.
	os.WriteFile(filepath.Join(w.project, "tools", "acme", "state", "capsule.wasm"), []byte("junk"), 0o644)
	w.ok("run", "state", "--", "write", "greeting", "hello-state")
	if fi, err := os.Stat(storeDir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("state store %s: %v %v", storeDir, fi, err)
	}
	r = w.ok("run", "state", "--", "read", "greeting")
	if !strings.Contains(r.stdout, "hello-state") {
		t.Fatalf("state did not persist: %s", r)
	}
	if b, err := os.ReadFile(filepath.Join(storeDir, "greeting")); err != nil || !strings.Contains(string(b), "hello-state") {
		t.Fatalf("the value is not in the state store on the host: %v %q", err, b)
	}
	// verify notices the damaged tools/ copy and --repair restores it.
	if r := w.mur("verify"); r.code != 1 || !strings.Contains(r.stdout, "tools") {
		t.Fatalf("verify of a damaged tools/: %s", r)
	}
	w.ok("verify", "--repair")
	w.ok("verify")

	// The payload kept for warm starts goes with its blob when gc removes the blob, which it
	// does once no lock pins it.
	// So does the payload's remembered compiled-cache key, which the pull wrote beside it.
	payloads := filepath.Join(w.home, "compiled", "payloads")
	kept := func() []string {
		m, _ := filepath.Glob(filepath.Join(payloads, "*"))
		return m
	}
	if m := kept(); len(m) != 2 || !slices.ContainsFunc(m, func(p string) bool { return strings.HasSuffix(p, ".wasm") }) ||
		!slices.ContainsFunc(m, func(p string) bool { return strings.HasSuffix(p, ".key") }) {
		t.Fatalf("kept payload and key after two runs: %v", m)
	}
	w.ok("cache", "gc", "--older-than", "0s")
	if m := kept(); len(m) != 2 {
		t.Fatalf("gc in the project removed what its lock pins: %v", m)
	}
	compiled := func() []string {
		m, _ := filepath.Glob(filepath.Join(w.home, "compiled", "wazero-*", "*"))
		return m
	}
	if len(compiled()) != 1 {
		t.Fatalf("compiled entries before gc: %v", compiled())
	}
	os.Remove(filepath.Join(w.project, "murmur.lock"))
	w.ok("cache", "gc", "--older-than", "0s")
	if m := compiled(); len(m) != 0 {
		t.Fatalf("the compiled module stayed after gc removed its blob: %v", m)
	}
	if ents, _ := os.ReadDir(payloads); len(ents) != 0 {
		t.Fatalf("kept payloads after gc removed their blob: %v", ents)
	}
}

func TestRunExitCodes(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.seedCompiled() // the guest runs here for what it does (compiled_seed_test.go)
	store := "oci-layout:" + filepath.Join(t.TempDir(), "store")
	dir := t.TempDir()
	for _, g := range []string{"exitcode", "sleeper"} {
		w.ok("push", artifacttest.File(t, dir, g, "1.0.0", guesttest.Build(t, g)), "--scope", "acme", "--store", store)
	}
	component := []byte("\x00asm\x0d\x00\x01\x00")
	w.ok("push", artifacttest.File(t, dir, "component", "1.0.0", component), "--scope", "acme", "--store", store)
	w.stores(store)
	w.write("murmur.yaml", capsuleYAML("acme/exitcode@1.0.0", "acme/sleeper@1.0.0", "acme/component@1.0.0"))
	w.ok("pull")
	if r := w.mur("run", "exitcode", "--", "7"); r.code != 7 {
		t.Errorf("exitcode 7: %s", r)
	}
	if r := w.mur("run", "--timeout", "1s", "sleeper", "--", "30"); r.code != 124 {
		t.Errorf("sleeper past its timeout: %s", r)
	}
	if r := w.mur("run", "component"); r.code != 126 || !strings.Contains(r.stderr, "component") {
		t.Errorf("component: %s", r)
	}
	if r := w.mur("run", "acme/never-pulled"); r.code != 127 || !strings.Contains(r.stderr, "mur pull") {
		t.Errorf("not pulled: %s", r)
	}
}

// TestWarmOffline: warm with network, then pull, verify and run with every store gone.
func TestWarmOffline(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	layout := filepath.Join(t.TempDir(), "store")
	f := artifacttest.File(t, t.TempDir(), "hello", "1.0.0", guesttest.Build(t, "hello"))
	w.ok("push", f, "--scope", "acme", "--store", "oci-layout:"+layout)
	w.stores("oci-layout:" + layout)
	w.write("murmur.yaml", capsuleYAML("acme/hello@1.0.0"))
	w.ok("pull", "--no-precompile")
	os.RemoveAll(w.home)
	os.RemoveAll(filepath.Join(w.project, "tools"))
	w.seedCompiled() // the guest runs here for what it does (compiled_seed_test.go)

	// Offline with a cold cache and no store on disk: a clear offline error that names the
	// artifact. (A layout on disk is no network: with one, the pull reads it.)
	w.write(".murmur/config.yaml", "")
	r := w.fails("offline", "--offline", "pull")
	if !strings.Contains(r.stderr, "acme/hello") || !strings.Contains(r.stderr, "mur warm") {
		t.Fatalf("offline error: %s", r.stderr)
	}
	w.stores("oci-layout:" + layout)
	r = w.ok("warm")
	if !strings.Contains(r.stdout, "1 fetched") {
		t.Fatalf("warm: %s", r)
	}
	r = w.ok("warm")
	if lines := strings.Count(strings.TrimSpace(r.stdout), "\n") + 1; lines != 1 || !strings.Contains(r.stdout, "1 already cached") {
		t.Fatalf("second warm is not one quiet summary line: %s", r)
	}
	mirror := filepath.Join(t.TempDir(), "mirror")
	w.ok("warm", "--layout", mirror)

	os.Rename(layout, layout+".off")
	w.env = append(w.env, "MUR_OFFLINE=1")
	w.ok("pull")
	w.ok("verify")
	if r := w.ok("run", "hello", "--", "offline"); !strings.Contains(r.stdout, "offline") {
		t.Fatalf("offline run: %s", r)
	}

	// The layout written by warm serves another machine.
	w2 := newWorld(t)
	w2.seedCompiled()
	w2.stores("oci-layout:" + mirror)
	w2.write("murmur.yaml", capsuleYAML("acme/hello@1.0.0"))
	os.WriteFile(filepath.Join(w2.project, "murmur.lock"), []byte(w.lockBytes()), 0o644)
	w2.ok("pull")
	w2.ok("verify")

	// A bundle carries the cache to a third.
	bundle := filepath.Join(t.TempDir(), "bundle.tar.zst")
	w.ok("cache", "export", "--lock", filepath.Join(w.project, "murmur.lock"), "-o", bundle)
	w3 := newWorld(t)
	w3.seedCompiled()
	w3.write("murmur.yaml", capsuleYAML("acme/hello@1.0.0"))
	os.WriteFile(filepath.Join(w3.project, "murmur.lock"), []byte(w.lockBytes()), 0o644)
	w3.ok("cache", "import", bundle)
	w3.env = append(w3.env, "MUR_OFFLINE=1")
	w3.ok("warm")
	w3.ok("run", "hello")
}

// TestWarmUnservedPlatform: a lock that pins a platform nobody serves fails clearly.
func TestWarmUnservedPlatform(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	layout := filepath.Join(t.TempDir(), "store")
	f := artifacttest.File(t, t.TempDir(), "hello", "1.0.0", []byte("\x00asm\x01\x00\x00\x00"))
	w.ok("push", f, "--scope", "acme", "--store", "oci-layout:"+layout)
	w.stores("oci-layout:" + layout)
	w.write("murmur.yaml", capsuleYAML("acme/hello@1.0.0"))
	w.write("murmur.lock", "lock_version: 3\nartifacts:\n  - name: acme/hello\n    resolved_version: 1.0.0\n    sha256:\n      platforms:\n        darwin-aarch64: "+strings.Repeat("ab", 32)+"\n    origin: operator\n")
	before := w.lockBytes()
	r := w.fails("not-found", "warm", "--platform", "all")
	if !strings.Contains(r.stderr, "acme/hello") {
		t.Fatalf("error does not name the artifact: %s", r.stderr)
	}
	w.assertUnchanged(0, before)
}

// snapshot lists every path under root with its mode and size.
func snapshot(t *testing.T, root string) string {
	var lines []string
	filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return nil
		}
		lines = append(lines, p+" "+info.Mode().String()+" "+strconv.FormatInt(info.Size(), 10))
		return nil
	})
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func fileDigest(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return digest.FromBytes(b).String()
}
