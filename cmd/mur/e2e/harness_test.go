// Package e2e runs the real mur binary as a user would, against the real docker-registry, the
// GitHub test server and real wasm guests. The reliability scenarios (TestReliability*) each
// inflict a fault and then assert that the next command succeeds, `mur verify` is clean and the
// lock still holds every entry; `make reliability` prints their summary table.
package e2e

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/internal/slowdown"
	"github.com/murmur-nexus/mur/internal/slowdown/deadline"
	"github.com/murmur-nexus/mur/lock"
)

var (
	summary = flag.Bool("reliability-summary", false, "print the reliability scenarios as a table")
	murBin  string
	// scratch is the test binary's own folder, removed when it ends, for what outlives a test.
	scratch string
)

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "mur-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	scratch = dir
	murBin = filepath.Join(dir, "mur")
	if bin := os.Getenv("MUR_E2E_BIN"); bin != "" {
		// make test built it beside the unit half (Makefile: e2e-bins), mur-provenance beside it.
		murBin = bin
	} else {
		// mur-provenance sits beside mur, where mur looks for it, as `make build` installs them.
		build := exec.Command("go", "build", "-o", dir, "github.com/murmur-nexus/mur/cmd/mur", "github.com/murmur-nexus/mur/cmd/mur-provenance")
		build.Stderr = os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building mur:", err)
			os.Exit(1)
		}
	}
	code := m.Run()
	if *summary {
		printSummary(code)
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// scenarios collects the reliability table.
var (
	scenarioMu sync.Mutex
	scenarios  []scenarioResult
)

type scenarioResult struct {
	name string
	held bool
	took time.Duration
}

// scenario names a reliability scenario for the summary table; it held when the test passed.
func scenario(t *testing.T, name string) {
	start := time.Now()
	t.Cleanup(func() {
		scenarioMu.Lock()
		defer scenarioMu.Unlock()
		scenarios = append(scenarios, scenarioResult{name: name, held: !t.Failed() && !t.Skipped(), took: time.Since(start)})
	})
}

func printSummary(code int) {
	scenarioMu.Lock()
	defer scenarioMu.Unlock()
	sort.SliceStable(scenarios, func(i, j int) bool { return scenarios[i].name < scenarios[j].name })
	fmt.Println()
	fmt.Println("| reliability scenario | held | time |")
	fmt.Println("| --- | --- | --- |")
	held := 0
	for _, s := range scenarios {
		mark := "NO"
		if s.held {
			mark = "yes"
			held++
		}
		fmt.Printf("| %s | %s | %s |\n", s.name, mark, s.took.Round(10*time.Millisecond))
	}
	fmt.Printf("\nreliability: %d passed, %d failed\n", held, len(scenarios)-held)
}

// world is one user's machine: a Murmur home and a project folder.
type world struct {
	t       testing.TB
	home    string
	project string
	env     []string
}

func newWorld(t testing.TB) *world {
	t.Helper()
	root := t.TempDir()
	w := &world{t: t, home: filepath.Join(root, "home"), project: filepath.Join(root, "project")}
	if err := os.MkdirAll(filepath.Join(w.project, ".murmur"), 0o755); err != nil {
		t.Fatal(err)
	}
	w.env = []string{"MURMUR_HOME=" + w.home, "HOME=" + root, "PATH=" + os.Getenv("PATH"), "GITHUB_TOKEN=", "MUR_OFFLINE=",
		// Never the real GitHub: a test that grants sources without its own server gets a closed port.
		"MUR_GITHUB_API_BASE=http://127.0.0.1:1", slowdown.Env + "=" + os.Getenv(slowdown.Env)}
	return w
}

type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// cmd prepares `mur args...` in the project folder. It is killed if it runs past
// deadline.Limit(), or outlives its test.
func (w *world) cmd(args ...string) *exec.Cmd {
	c := exec.CommandContext(deadline.Context(w.t), murBin, args...)
	c.WaitDelay = time.Minute // for a child that holds its output open once mur is killed
	c.Dir = w.project
	c.Env = append([]string{}, w.env...)
	return c
}

func (w *world) mur(args ...string) result {
	w.t.Helper()
	return w.runCmd(w.cmd(args...), args)
}

// runCmd runs c, a mur command line made by w.cmd, and collects its outcome.
func (w *world) runCmd(c *exec.Cmd, args []string) result {
	w.t.Helper()
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	start := time.Now()
	err := c.Run()
	if took := time.Since(start); took >= deadline.Limit() {
		w.t.Fatalf("mur %v did not finish within %s, and was killed; it had written:\n%s%s", args, took.Round(time.Second), out.String(), errb.String())
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		w.t.Fatalf("mur %v: %v", args, err)
	}
	return result{stdout: out.String(), stderr: errb.String(), code: code}
}

func (w *world) ok(args ...string) result {
	w.t.Helper()
	r := w.mur(args...)
	if r.code != 0 {
		w.t.Fatalf("mur %s: %s", strings.Join(args, " "), r)
	}
	return r
}

// fails runs mur, expects a failure whose stderr holds `mur: <token>:`, and returns it.
func (w *world) fails(token string, args ...string) result {
	w.t.Helper()
	r := w.mur(args...)
	if r.code == 0 || !strings.Contains(r.stderr, "mur: "+token+":") {
		w.t.Fatalf("mur %s: want a %s: error, got %s", strings.Join(args, " "), token, r)
	}
	return r
}

func (w *world) write(rel, content string) {
	w.t.Helper()
	p := filepath.Join(w.project, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		w.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		w.t.Fatal(err)
	}
}

// writeHome writes rel under the Murmur home: its config.yaml is where trust is decided.
func (w *world) writeHome(rel, content string) {
	w.t.Helper()
	p := filepath.Join(w.home, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		w.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) stores(addrs ...string) {
	w.write(".murmur/config.yaml", "stores: [\""+strings.Join(addrs, "\", \"")+"\"]\n")
}

func (w *world) lock() *lock.Lock {
	w.t.Helper()
	l, err := lock.Read(filepath.Join(w.project, "murmur.lock"))
	if err != nil {
		w.t.Fatal(err)
	}
	return l
}

// lockBytes is the lock file as it is on disk, "" when there is none.
func (w *world) lockBytes() string {
	b, _ := os.ReadFile(filepath.Join(w.project, "murmur.lock"))
	return string(b)
}

// blobCount counts the blobs in the CAS.
func (w *world) blobCount() int {
	ents, _ := os.ReadDir(filepath.Join(w.home, "cas", "blobs", "sha256"))
	return len(ents)
}

// assertUnchanged checks that a failed command left no blob, no lock change and no tools/.
func (w *world) assertUnchanged(blobs int, lockBefore string) {
	w.t.Helper()
	if n := w.blobCount(); n != blobs {
		w.t.Errorf("the CAS holds %d blobs, want %d", n, blobs)
	}
	if got := w.lockBytes(); got != lockBefore {
		w.t.Errorf("murmur.lock changed:\n--- before\n%s\n--- after\n%s", lockBefore, got)
	}
	if lockBefore == "" {
		if _, err := os.Stat(filepath.Join(w.project, "tools")); err == nil {
			ents, _ := os.ReadDir(filepath.Join(w.project, "tools"))
			if len(ents) > 0 {
				w.t.Errorf("tools/ exists after a failed first pull")
			}
		}
	}
}

// networkTimeout is MUR_NETWORK_TIMEOUT for tests with a store that never answers: short, so the
// test doesn't wait long on it, and stretched by MUR_TEST_SLOWDOWN, so that the stores that do
// answer are not taken for silent ones on a loaded machine. The tests that set it run alone
// (TestRunsAlone), so that the other tests do not crowd the machine past that margin.
func networkTimeout() string {
	return "MUR_NETWORK_TIMEOUT=" + slowdown.Scale(2*time.Second).String()
}

// ageIngest makes every file in the CAS's ingest/ older than cas.IngestGrace, as if the test had
// waited that long: gc leaves younger ones alone, in case a live ingest has not locked its file
// yet.
func (w *world) ageIngest() {
	w.t.Helper()
	dir := filepath.Join(w.home, "cas", "ingest")
	ents, err := os.ReadDir(dir)
	if err != nil {
		w.t.Fatal(err)
	}
	old := time.Now().Add(-cas.IngestGrace - time.Minute)
	for _, e := range ents {
		if err := os.Chtimes(filepath.Join(dir, e.Name()), old, old); err != nil {
			w.t.Fatal(err)
		}
	}
}

// TestRunsAlone runs first, and beside no other test, the tests whose margins a crowded machine
// could break: those that wait out a short MUR_NETWORK_TIMEOUT (networkTimeout), which the stores
// that do answer must beat, and the split of a capped link into connections, for which mur must
// hash and write faster than the link brings the bytes. They mostly wait, so they run beside each
// other.
func TestRunsAlone(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"TestReliabilityMirrorChain", testReliabilityMirrorChain},
		{"TestReliabilityMisbehavingGitHub", testReliabilityMisbehavingGitHub},
		{"TestPullParallelConnections", testPullParallelConnections},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t)
		})
	}
}
