package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/fetch/proxytest"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
	"github.com/murmur-nexus/mur/internal/slowdown/deadline"
	"github.com/murmur-nexus/mur/sandbox/guesttest"
)

// afterFault is what every scenario asserts once the fault is over: the next pull succeeds,
// `mur verify` is clean and the lock holds every entry it should.
func (w *world) afterFault(names ...string) {
	w.t.Helper()
	w.ok("pull")
	if r := w.mur("verify"); r.code != 0 {
		w.t.Fatalf("mur verify after the fault: %s", r)
	}
	l := w.lock()
	for _, n := range names {
		if l.Find(n) == nil {
			w.t.Errorf("murmur.lock lost %s:\n%s", n, w.lockBytes())
		}
	}
}

func capsuleYAML(artifacts ...string) string {
	var b strings.Builder
	b.WriteString("name: e2e-capsule\nversion: \"1.0.0\"\nartifacts:\n")
	for _, a := range artifacts {
		name, version, _ := strings.Cut(a, "@")
		b.WriteString("  - name: " + name + "\n    version: \"" + version + "\"\n")
	}
	b.WriteString("capabilities:\n  filesystem: { scope: \".\" }\n  state: {}\n  limits: { memory_mib: 256, timeout_s: 60 }\n  install: { from: [stores] }\n")
	return b.String()
}

func TestReliabilityKillDuringPull(t *testing.T) {
	t.Parallel()
	scenario(t, "SIGKILL at several points of a 64 MiB pull from the registry")
	reg := registrytest.Start(t)
	w := newWorld(t)
	big := artifacttest.File(t, t.TempDir(), "big", "1.0.0", artifacttest.Module(64<<20, uint64(64<<20)))
	w.ok("push", big, "--scope", "e2e", "--store", "oci://"+reg.Addr()+"/murmur")
	// A blob this large is fetched over several connections into a file grown to its full size
	// at once, so the kill points are counted in bytes served rather than read off the file.
	slow := proxytest.Start(t, reg.Addr(), proxytest.Options{PathContains: "/blobs/", BytesPerSecond: 12 << 20})
	w.stores("oci://" + slow.Addr() + "/murmur")
	w.write("murmur.yaml", capsuleYAML("e2e/big@1.0.0"))

	ingest := filepath.Join(w.home, "cas", "ingest")
	for _, at := range []int64{1, 16 << 20, 48 << 20} {
		c := w.cmd("pull", "--no-precompile")
		before := slow.BytesServed("/v2/murmur/e2e/big/blobs/")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		grown := waitFor(func() bool { return slow.BytesServed("/v2/murmur/e2e/big/blobs/")-before >= at })
		c.Process.Signal(syscall.SIGKILL)
		c.Wait()
		if !grown {
			t.Fatalf("the pull was never served %d bytes", at)
		}
		w.assertUnchanged(0, "")
	}
	w.afterFault("e2e/big")
	w.ageIngest() // gc leaves fresh temporary files alone; these are the killed pulls'
	if r := w.ok("cache", "gc", "--older-than", "0s", "--keep", filepath.Join(w.project, "murmur.lock")); r.code != 0 {
		t.Fatal(r)
	}
	if n := countFiles(ingest); n != 0 {
		t.Errorf("%d leftovers in cas/ingest after gc", n)
	}
	w.ok("verify")
}

func TestReliabilityConcurrentPulls(t *testing.T) {
	t.Parallel()
	scenario(t, "eight concurrent mur pull processes in one project")
	w := newWorld(t)
	store := "oci-layout:" + filepath.Join(t.TempDir(), "store")
	var names []string
	dir := t.TempDir()
	for i := 0; i < 8; i++ {
		name := "tool" + string(rune('a'+i))
		f := artifacttest.File(t, dir, name, "1.0.0", artifacttest.Module(256<<10+i, uint64(256<<10+i)))
		w.ok("push", f, "--scope", "e2e", "--store", store)
		names = append(names, "e2e/"+name+"@1.0.0")
	}
	w.stores(store)
	w.write("murmur.yaml", capsuleYAML(names...))
	var wg sync.WaitGroup
	results := make([]result, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			// Half pull their own artifact, half pull everything, so that both kinds of overlap happen.
			if i%2 == 0 {
				results[i] = w.mur("pull", "--no-precompile", names[i])
			} else {
				results[i] = w.mur("pull", "--no-precompile")
			}
		}(i)
	}
	wg.Wait()
	for i, r := range results {
		if r.code != 0 {
			t.Errorf("process %d: %s", i, r)
		}
	}
	var plain []string
	for _, n := range names {
		plain = append(plain, strings.TrimSuffix(n, "@1.0.0"))
	}
	w.afterFault(plain...)
	if got := len(w.lock().Artifacts); got != 8 {
		t.Errorf("murmur.lock holds %d entries, want 8", got)
	}
}

func TestReliabilityCorruption(t *testing.T) {
	t.Parallel()
	scenario(t, "a corrupted CAS blob and a corrupted compiled entry")
	w := newWorld(t)
	store := "oci-layout:" + filepath.Join(t.TempDir(), "store")
	f := artifacttest.File(t, t.TempDir(), "hello", "1.0.0", guesttest.Build(t, "hello"))
	w.ok("push", f, "--scope", "e2e", "--store", store)
	w.stores(store)
	w.write("murmur.yaml", capsuleYAML("e2e/hello@1.0.0"))
	w.ok("pull")
	hex := strings.TrimPrefix(w.lock().Artifacts[0].SHA256.Any, "sha256:")
	blob := filepath.Join(w.home, "cas", "blobs", "sha256", hex)
	os.Chmod(blob, 0o644)
	b, _ := os.ReadFile(blob)
	b[len(b)/2] ^= 0xff
	os.WriteFile(blob, b, 0o444)

	if r := w.mur("run", "hello"); r.code != 125 || !strings.Contains(r.stderr, "integrity") {
		t.Fatalf("run of a tampered blob: want 125 and an integrity error, got %s", r)
	}
	if r := w.mur("verify"); r.code != 1 {
		t.Fatalf("verify of a tampered blob: %s", r)
	}
	w.ok("verify", "--repair")
	w.ok("verify")

	// Cut every compiled entry of the Go guest to its first half, as a full disk or a crash mid-write
	// would: a prefix that still parses as far as it goes. The run compiles the guest again and
	// says so. (sandbox's tests damage a small C guest's entries every other way; this is the
	// multi-megabyte one, compiled by the binary users run.)
	damaged := 0
	filepath.Walk(filepath.Join(w.home, "compiled"), func(p string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() && info.Size() > 1 {
			b, _ := os.ReadFile(p)
			if os.WriteFile(p, b[:len(b)/2], 0o600) == nil {
				damaged++
			}
		}
		return nil
	})
	if damaged == 0 {
		t.Fatal("the pull left no compiled entry to damage")
	}
	r := w.ok("run", "hello", "--", "after", "corruption")
	if !strings.Contains(r.stdout, "arg after") {
		t.Fatalf("hello output: %s", r)
	}
	if !strings.Contains(r.stderr, "compiled cache") || !strings.Contains(r.stderr, "compiled again") {
		t.Errorf("the run repaired the compiled cache without a warning: %s", r.stderr)
	}
	w.afterFault("e2e/hello")
}

func TestReliabilityEscaper(t *testing.T) {
	t.Parallel()
	scenario(t, "a sandbox escaper")
	w := newWorld(t)
	w.seedCompiled() // the guest runs here for what it does (compiled_seed_test.go)
	store := "oci-layout:" + filepath.Join(t.TempDir(), "store")
	f := artifacttest.File(t, t.TempDir(), "escaper", "1.0.0", guesttest.Build(t, "escaper"))
	w.ok("push", f, "--scope", "e2e", "--store", store)
	w.stores(store)
	// No state grant: the escaper's attempt to use state/ must not reach any state store.
	yaml := strings.Replace(capsuleYAML("e2e/escaper@1.0.0"), `filesystem: { scope: "." }`, `filesystem: { scope: ".", read_only: ["ro"] }`, 1)
	w.write("murmur.yaml", strings.Replace(yaml, "  state: {}\n", "", 1))
	w.ok("pull")
	outside := filepath.Join(filepath.Dir(w.project), "outside")
	secret := filepath.Join(outside, "secret.txt")
	wd := filepath.Join(w.project, "workdir")
	os.MkdirAll(outside, 0o755)
	os.WriteFile(secret, []byte("host secret"), 0o600)
	os.MkdirAll(filepath.Join(wd, "ro"), 0o755)
	os.WriteFile(filepath.Join(wd, "ro", "existing.txt"), []byte("keep"), 0o644)
	os.WriteFile(filepath.Join(wd, "inside.txt"), []byte("inside"), 0o644)
	os.WriteFile(filepath.Join(wd, "victim.txt"), []byte("victim"), 0o644)
	os.Symlink(outside, filepath.Join(wd, "prelink"))
	os.Symlink("../../outside", filepath.Join(wd, "prelink-rel"))
	r := w.mur("run", "escaper", "--", secret)
	if strings.Contains(r.stdout, "ALLOWED") || !strings.Contains(r.stdout, "DENIED") {
		t.Fatalf("escaper: %s", r)
	}
	if _, err := os.Stat(filepath.Join(w.home, "state")); err == nil {
		t.Errorf("a state folder exists without a state grant")
	}
	if b, _ := os.ReadFile(secret); string(b) != "host secret" {
		t.Errorf("host secret changed: %q", b)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 1 {
		t.Errorf("the outside folder changed: %v", ents)
	}
	if b, _ := os.ReadFile(filepath.Join(wd, "ro", "existing.txt")); string(b) != "keep" {
		t.Errorf("read-only file changed: %q", b)
	}
	w.afterFault("e2e/escaper")
}

func TestReliabilityHostileInputs(t *testing.T) {
	t.Parallel()
	scenario(t, "hostile zips and locks")
	w := newWorld(t)
	dir := t.TempDir()
	for name, zip := range hostileZips(t) {
		p := filepath.Join(dir, name+".mur.zip")
		os.WriteFile(p, zip, 0o644)
		r := w.fails("invalid-artifact", "pull", p)
		if !strings.Contains(r.stderr, name+".mur.zip") && !strings.Contains(r.stderr, "entry") {
			t.Errorf("%s: the error does not name the file or entry: %s", name, r.stderr)
		}
		w.assertUnchanged(0, "")
	}
	store := "oci-layout:" + filepath.Join(t.TempDir(), "store")
	f := artifacttest.File(t, dir, "ok", "1.0.0", []byte("\x00asm\x01\x00\x00\x00"))
	w.ok("push", f, "--scope", "e2e", "--store", store)
	w.stores(store)
	w.write("murmur.yaml", capsuleYAML("e2e/ok@1.0.0"))
	w.ok("pull")
	good := w.lockBytes()
	for name, bad := range map[string]string{
		"lock_version 2": strings.Replace(good, "lock_version: 3", "lock_version: 2", 1),
		"truncated":      good[:len(good)/2],
		"malformed hex":  strings.Replace(good, w.lock().Artifacts[0].SHA256.Any, "zz", 1),
	} {
		w.write("murmur.lock", bad)
		r := w.fails("invalid-lock", "pull")
		if w.lockBytes() != bad {
			t.Errorf("%s: mur changed the refused lock", name)
		}
		_ = r
	}
	w.write("murmur.lock", good)
	w.afterFault("e2e/ok")
}

// waitFor polls cond until it holds, or gives up at the test's deadline for one event.
func waitFor(cond func() bool) bool {
	until := time.Now().Add(deadline.Limit())
	for time.Now().Before(until) {
		if cond() {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return false
}

func largestFile(dir string) int64 {
	var n int64
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if info, err := e.Info(); err == nil && info.Size() > n {
			n = info.Size()
		}
	}
	return n
}

func countFiles(dir string) int {
	ents, _ := os.ReadDir(dir)
	return len(ents)
}
