package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/fetch/proxytest"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
	"github.com/murmur-nexus/mur/sandbox/guesttest"
)

// sibling is another project on the same machine: its own folder, the same Murmur home.
func (w *world) sibling(name string) *world {
	w.t.Helper()
	s := &world{t: w.t, home: w.home, project: filepath.Join(filepath.Dir(w.project), name), env: w.env}
	if err := os.MkdirAll(filepath.Join(s.project, ".murmur"), 0o755); err != nil {
		w.t.Fatal(err)
	}
	return s
}

// elsewhere runs mur in a folder that is no project, as a cron job or a user in $HOME would.
func (w *world) elsewhere(args ...string) result {
	w.t.Helper()
	c := w.cmd(args...)
	c.Dir = filepath.Dir(w.home)
	return w.runCmd(c, args)
}

// pinned is the blob path of what the project's lock pins for name.
func (w *world) pinned(name string) string {
	w.t.Helper()
	e := w.lock().Find(name)
	if e == nil {
		w.t.Fatalf("%s pins no %s:\n%s", w.project, name, w.lockBytes())
	}
	return filepath.Join(w.home, "cas", "blobs", "sha256", e.SHA256.Any)
}

// TestReliabilityGCDuringParallelPulls is the race of the issue that brought leases and roots:
// gc --older-than 0s, run again and again from outside any project, while twelve projects pull
// twelve artifacts at once. Every pull succeeds, no pinned blob goes, and every tool then runs.
func TestReliabilityGCDuringParallelPulls(t *testing.T) {
	t.Parallel()
	scenario(t, "gc --older-than 0s in a loop during 12 parallel pulls of different artifacts")
	const n = 12
	w := newWorld(t)
	w.seedCompiled() // the guest runs here for what it does (compiled_seed_test.go)
	store := "oci-layout:" + filepath.Join(t.TempDir(), "store")
	hello := guesttest.Build(t, "hello")
	dir := t.TempDir()
	var projects []*world
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("tool%02d", i)
		// The same guest under twelve names: twelve blobs, one compiled module.
		f := artifacttest.File(t, dir, name, "1.0.0", hello)
		w.ok("push", f, "--scope", "e2e", "--store", store)
		p := w.sibling("project-" + name)
		p.stores(store)
		p.write("murmur.yaml", capsuleYAML("e2e/"+name+"@1.0.0"))
		projects = append(projects, p)
	}

	stop := make(chan struct{})
	var gcs atomic.Int64
	gcDone := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				gcDone <- nil
				return
			default:
			}
			if r := w.elsewhere("cache", "gc", "--older-than", "0s"); r.code != 0 {
				gcDone <- fmt.Errorf("gc failed: %s", r)
				return
			}
			gcs.Add(1)
		}
	}()
	var wg sync.WaitGroup
	results := make([]result, n)
	for i, p := range projects {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = p.mur("pull", "--no-precompile")
		}()
	}
	wg.Wait()
	close(stop)
	if err := <-gcDone; err != nil {
		t.Fatal(err)
	}
	if gcs.Load() == 0 {
		t.Fatal("no gc ran during the pulls")
	}
	// And once more after them: what the locks pin stays for good, not only while pulls run.
	w.elsewhere("cache", "gc", "--older-than", "0s")
	missing := 0
	for i, p := range projects {
		if results[i].code != 0 {
			t.Errorf("pull in %s: %s", p.project, results[i])
			continue
		}
		name := fmt.Sprintf("tool%02d", i)
		if _, err := os.Stat(p.pinned("e2e/" + name)); err != nil {
			missing++
			t.Errorf("%s: the pinned blob is gone: %v", name, err)
			continue
		}
		if r := p.mur("run", name, "--", "after", "gc"); r.code != 0 || !strings.Contains(r.stdout, "arg after") {
			t.Errorf("run %s: %s", name, r)
		}
	}
	t.Logf("%d gc runs during the pulls; %d missing blobs", gcs.Load(), missing)
}

// TestReliabilityMaxSizeWithKills: cache.max_size trims after every pull and gc --max-size runs
// alongside, while pulls of eight projects are killed at various points. Every blob a lock pins
// afterwards verifies, and the next pulls complete what the killed ones left.
func TestReliabilityMaxSizeWithKills(t *testing.T) {
	t.Parallel()
	scenario(t, "cache.max_size and gc --max-size during concurrent pulls and SIGKILLs")
	const n, size = 8, 4 << 20
	reg := registrytest.Start(t)
	w := newWorld(t)
	dir := t.TempDir()
	for i := 0; i < n; i++ {
		f := artifacttest.File(t, dir, fmt.Sprintf("big%d", i), "1.0.0", artifacttest.Module(size, uint64(9000+i)))
		w.ok("push", f, "--scope", "e2e", "--store", "oci://"+reg.Addr()+"/murmur")
	}
	// About 40 ms a pull, so that kills land before, during and after the transfer.
	slow := proxytest.Start(t, reg.Addr(), proxytest.Options{PathContains: "/blobs/", BytesPerSecond: 96 << 20}).Addr()
	if err := os.MkdirAll(w.home, 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(w.home, "config.yaml"), []byte("cache: { max_size: 12MiB }\n"), 0o600)
	var projects []*world
	for i := 0; i < n; i++ {
		p := w.sibling(fmt.Sprintf("project-big%d", i))
		p.stores("oci://" + slow + "/murmur")
		p.write("murmur.yaml", capsuleYAML(fmt.Sprintf("e2e/big%d@1.0.0", i)))
		projects = append(projects, p)
	}
	for round := 0; round < 3; round++ {
		var wg sync.WaitGroup
		for i, p := range projects {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := p.cmd("pull", "--no-precompile", "-q")
				if err := c.Start(); err != nil {
					t.Error(err)
					return
				}
				if (i+round)%2 == 1 {
					time.Sleep(time.Duration((i*29+round*17)%90) * time.Millisecond)
					c.Process.Signal(syscall.SIGKILL)
				}
				c.Wait()
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r := w.elsewhere("cache", "gc", "--max-size", "8MiB"); r.code != 0 {
				t.Errorf("gc --max-size during the pulls: %s", r)
			}
		}()
		wg.Wait()
		// Whatever the kills left, every blob a lock pins now is whole.
		for _, p := range projects {
			if _, err := os.Stat(filepath.Join(p.project, "murmur.lock")); err != nil {
				continue
			}
			if r := p.mur("verify"); r.code != 0 {
				t.Fatalf("round %d, %s: a pinned blob does not verify after the kills:\n%s", round, p.project, r)
			}
		}
	}
	// The next pulls complete; everything pinned verifies; the cap could not be met, since all of
	// it is pinned, and the pull says so.
	for _, p := range projects {
		r := p.ok("pull", "--no-precompile")
		p.ok("verify")
		_ = r
	}
	if r := w.elsewhere("cache", "verify"); r.code != 0 {
		t.Fatalf("cache verify: %s", r)
	}
	w.ageIngest() // gc leaves fresh temporary files alone; these are the killed pulls'
	r := w.elsewhere("cache", "gc", "--max-size", "8MiB")
	if r.code != 0 || !strings.Contains(r.stderr, "over --max-size") {
		t.Fatalf("gc --max-size below what is pinned: %s", r)
	}
	if n := countFiles(filepath.Join(w.home, "cas", "ingest")); n != 0 {
		t.Errorf("%d leftovers in cas/ingest after gc", n)
	}
	for _, p := range projects {
		p.ok("verify")
	}
}

// TestGCKeepsEveryProjectsPins: gc anywhere keeps what any project pins, says why it removes
// what it removes, and forgets projects that are gone.
func TestGCKeepsEveryProjectsPins(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	store := "oci-layout:" + filepath.Join(t.TempDir(), "store")
	f := artifacttest.File(t, t.TempDir(), "kept", "1.0.0", []byte(artifacttest.EmptyModule))
	w.ok("push", f, "--scope", "e2e", "--store", store)
	w.stores(store)
	w.write("murmur.yaml", capsuleYAML("e2e/kept@1.0.0"))
	w.ok("pull", "--no-precompile")
	blob := w.pinned("e2e/kept")
	// From outside the project, and from inside it without --keep: the pin holds.
	if r := w.elsewhere("cache", "gc", "--older-than", "0s"); r.code != 0 || strings.Contains(r.stdout, "removed sha256:") {
		t.Fatalf("gc outside the project: %s", r)
	}
	if r := w.ok("cache", "gc", "--older-than", "0s"); strings.Contains(r.stdout, "removed sha256:") {
		t.Fatalf("gc inside the project: %s", r)
	}
	if _, err := os.Stat(blob); err != nil {
		t.Fatal("gc removed a pinned blob")
	}
	// A leftover of a staging that was killed goes too.
	leftover := filepath.Join(w.project, "tools", "e2e", ".mur-tmp-kept-dead")
	os.MkdirAll(leftover, 0o755)
	old := time.Now().Add(-time.Hour)
	os.Chtimes(leftover, old, old)
	if r := w.elsewhere("cache", "gc"); !strings.Contains(r.stdout, "removed staging leftover "+leftover) {
		t.Fatalf("gc and a staging leftover: %s", r)
	}
	// The project goes: a dry run says what would go and why; gc then removes it. (Its root was
	// registered long ago: a root registered moments ago may be for a lock about to be written.)
	os.RemoveAll(w.project)
	roots, _ := filepath.Glob(filepath.Join(w.home, "cas", "roots", "*"))
	for _, r := range roots {
		os.Chtimes(r, old, old)
	}
	r := w.elsewhere("cache", "gc", "--older-than", "0s", "--dry-run")
	if r.code != 0 || !strings.Contains(r.stdout, "would remove sha256:") || !strings.Contains(r.stdout, "older-than") ||
		!strings.Contains(r.stdout, "would forget the GC root "+filepath.Join(w.project, "murmur.lock")) {
		t.Fatalf("dry run after the project went: %s", r)
	}
	if _, err := os.Stat(blob); err != nil {
		t.Fatal("a dry run removed the blob")
	}
	r = w.elsewhere("cache", "gc", "--max-size", "1", "--json")
	var rep struct {
		Blobs []struct{ Rule, Reason string }
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || len(rep.Blobs) != 1 || rep.Blobs[0].Rule != "max-size" {
		t.Fatalf("gc --max-size --json: %v\n%s", err, r)
	}
	if _, err := os.Stat(blob); err == nil {
		t.Fatal("gc kept the blob of a project that is gone")
	}
}

// TestLatestAndReuse: latest from a real registry resolves to the highest version and its
// packed manifest is checked against that; a second project on the same home downloads nothing.
func TestLatestAndReuse(t *testing.T) {
	t.Parallel()
	reg := registrytest.Start(t)
	w := newWorld(t)
	w.seedCompiled() // the guest runs here for what it does (compiled_seed_test.go)
	dir := t.TempDir()
	hello := guesttest.Build(t, "hello")
	for _, v := range []string{"1.9.0", "1.10.0"} {
		f := artifacttest.File(t, dir, "hi", v, hello)
		w.ok("push", f, "--scope", "acme", "--store", "oci://"+reg.Addr()+"/murmur")
	}
	w.stores("oci://" + reg.Addr() + "/murmur")
	r := w.ok("pull", "acme/hi")
	if !strings.Contains(r.stdout, "acme/hi@1.10.0") {
		t.Fatalf("pull acme/hi: %s", r)
	}
	other := w.sibling("other")
	other.stores("oci://" + reg.Addr() + "/murmur")
	other.write("murmur.yaml", strings.Replace(capsuleYAML("acme/hi@latest"), `version: "latest"`, "version: latest", 1))
	r = other.ok("--json", "pull")
	var out struct {
		Results []struct {
			Version     string
			CacheHit    bool  `json:"cache_hit"`
			Transferred int64 `json:"transferred"`
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || len(out.Results) != 1 {
		t.Fatalf("pull --json: %v\n%s", err, r)
	}
	if got := out.Results[0]; got.Version != "1.10.0" || !got.CacheHit || got.Transferred != 0 {
		t.Fatalf("the second project's pull of latest: %+v, want a cache hit of 1.10.0", got)
	}
	if rs := other.ok("cache", "records", "--json"); !strings.Contains(rs.stdout, `"cache-hit"`) {
		t.Fatalf("records: %s", rs)
	}
	other.ok("run", "hi")
}

// TestReuseDownloadsNothing counts the blob requests a registry sees: a project pulling what
// another already pulled asks for the manifest only.
func TestReuseDownloadsNothing(t *testing.T) {
	t.Parallel()
	f := registrytest.StartFaulty(t)
	var blobGETs atomic.Int64
	w := newWorld(t)
	file := artifacttest.File(t, t.TempDir(), "big", "1.0.0", artifacttest.Module(1<<20, 77))
	w.ok("push", file, "--scope", "acme", "--store", "oci://"+f.Addr()+"/murmur")
	f.Arm(func(rw http.ResponseWriter, r *http.Request, next http.Handler) {
		if registrytest.IsBlob(r) {
			blobGETs.Add(1)
		}
		next.ServeHTTP(rw, r)
	})
	w.stores("oci://" + f.Addr() + "/murmur")
	w.ok("pull", "--no-precompile", "acme/big@1.0.0")
	if blobGETs.Load() != 1 {
		t.Fatalf("the first pull fetched %d blobs", blobGETs.Load())
	}
	other := w.sibling("other")
	other.stores("oci://" + f.Addr() + "/murmur")
	other.ok("pull", "--no-precompile", "acme/big@1.0.0")
	if blobGETs.Load() != 1 {
		t.Fatalf("the second project downloaded the blob the CAS holds (%d blob requests)", blobGETs.Load())
	}
}
