package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
	"github.com/murmur-nexus/mur/sandbox/guesttest"
)

// The sandbox's trust boundaries, through the real binary: what a guest sees of mur's
// environment, where its paths land, what a cloned project's symlinks can make mur do, and how
// much host memory a guest costs.

// sandboxWorld pushes guests (name → wasm) to a layout store and declares them in murmur.yaml
// with caps as the capsule's capabilities.
func sandboxWorld(t testing.TB, caps string, guests map[string][]byte) *world {
	t.Helper()
	w := newWorld(t)
	w.seedCompiled() // the guest runs here for what it does (compiled_seed_test.go)
	store := "oci-layout:" + filepath.Join(t.TempDir(), "store")
	dir := t.TempDir()
	names := make([]string, 0, len(guests))
	for name := range guests {
		names = append(names, name)
	}
	sort.Strings(names)
	var yaml strings.Builder
	yaml.WriteString("name: e2e-capsule\nversion: \"1.0.0\"\nartifacts:\n")
	for _, name := range names {
		w.ok("push", artifacttest.File(t, dir, name, "1.0.0", guests[name]), "--scope", "e2e", "--store", store)
		yaml.WriteString("  - name: e2e/" + name + "\n    version: \"1.0.0\"\n")
	}
	yaml.WriteString("capabilities:\n" + caps + "  install: { from: [stores] }\n")
	w.stores(store)
	w.write("murmur.yaml", yaml.String())
	return w
}

// TestRunGuestSeesOnlyAllowedEnv: mur's own environment holds secrets; the guest gets the names
// env.allow grants and PWD, and nothing else.
func TestRunGuestSeesOnlyAllowedEnv(t *testing.T) {
	t.Parallel()
	w := sandboxWorld(t, "  env: { allow: [MUR_T_LANG, MUR_T_UNSET] }\n", map[string][]byte{"hello": guesttest.Build(t, "hello")})
	w.ok("pull")
	w.env = append(w.env, "MUR_TEST_SECRET=hunter2", "GITHUB_TOKEN=ghp_e2esecret", "MUR_T_LANG=C.UTF-8")
	r := w.ok("run", "hello")
	var env []string
	for _, l := range strings.Split(r.stdout, "\n") {
		if v, ok := strings.CutPrefix(l, "env "); ok {
			env = append(env, v)
		}
	}
	sort.Strings(env)
	if strings.Join(env, " ") != "MUR_T_LANG=C.UTF-8 PWD=/" {
		t.Fatalf("the guest's environment is %q, want MUR_T_LANG=C.UTF-8 and PWD=/ only", env)
	}
	if strings.Contains(r.stdout+r.stderr, "hunter2") || strings.Contains(r.stdout+r.stderr, "ghp_e2esecret") {
		t.Fatalf("a secret leaked: %s", r)
	}
}

// TestRunPathsGoAndC: a Go guest and a C (wasi-libc) guest reach the state store by every
// spelling of state/<file>, and names that only start with "state" or "docs" stay in the workdir.
func TestRunPathsGoAndC(t *testing.T) {
	t.Parallel()
	w := sandboxWorld(t, "  filesystem: { scope: \".\", read_only: [docs] }\n  state: {}\n", map[string][]byte{
		"gopaths": guesttest.Build(t, "paths"),
		"cpaths":  guesttest.BuildC(t, "paths"),
	})
	w.ok("pull")
	store := filepath.Join(w.home, "state", "e2e-capsule")
	wd := filepath.Join(w.project, "workdir")
	for _, run := range [][]string{{"gopaths", "paths"}, {"cpaths"}} {
		os.RemoveAll(store)
		os.RemoveAll(wd)
		args := append(append([]string{"run", run[0], "--"}, run[1:]...), "state/a", "/state/b", "./state/c", "/stateful.txt", "stateX.txt", "./state-notes", "docsX.txt", "docs/x")
		r := w.ok(args...)
		if !strings.Contains(r.stdout, "docs/x ERR") || strings.Count(r.stdout, " ok\n") != 7 {
			t.Errorf("%s: %s", run[0], r)
		}
		for dir, want := range map[string]string{store: "a b c", wd: "docs docsX.txt state-notes stateX.txt stateful.txt"} {
			ents, _ := os.ReadDir(dir)
			var got []string
			for _, e := range ents {
				got = append(got, e.Name())
			}
			if strings.Join(got, " ") != want {
				t.Errorf("%s: %s holds %v, want %s", run[0], dir, got, want)
			}
		}
	}
}

// TestClonedProjectSymlinks: a cloned project's tools/, tools/<scope> and workdir/ committed as
// symlinks to a folder elsewhere. pull, verify --repair and run refuse, name the symlink and its
// target, and leave the target alone.
func TestClonedProjectSymlinks(t *testing.T) {
	t.Parallel()
	w := sandboxWorld(t, "", map[string][]byte{"hello": guesttest.Build(t, "hello")})
	outside := filepath.Join(t.TempDir(), "elsewhere")
	for _, f := range []string{"key.txt", "e2e/hello/key.txt", "hello/key.txt"} {
		p := filepath.Join(outside, f)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte("the user's key"), 0o600)
	}
	before := snapshot(t, outside)
	unchanged := func(what string) {
		t.Helper()
		if after := snapshot(t, outside); after != before {
			t.Fatalf("%s changed the folder the symlink points at:\n--- before\n%s\n--- after\n%s", what, before, after)
		}
	}
	link := func(rel string) string {
		p := filepath.Join(w.project, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.Symlink(outside, p); err != nil {
			t.Fatal(err)
		}
		return p
	}

	for _, rel := range []string{"tools", "tools/e2e"} {
		p := link(rel)
		r := w.fails("denied", "pull")
		if !strings.Contains(r.stderr, p+" is a symlink to "+outside) {
			t.Errorf("pull with %s a symlink: %s", rel, r.stderr)
		}
		if w.blobCount() != 0 || w.lockBytes() != "" {
			t.Errorf("a refused pull left %d blobs and the lock %q", w.blobCount(), w.lockBytes())
		}
		unchanged("pull")
		os.Remove(p)
	}

	w.ok("pull")
	os.RemoveAll(filepath.Join(w.project, "tools", "e2e"))
	p := link("tools/e2e")
	if r := w.mur("verify"); r.code != 1 || !strings.Contains(r.stdout, p+" is a symlink to "+outside) {
		t.Errorf("verify: %s", r)
	}
	if r := w.mur("verify", "--repair"); r.code != 1 || strings.Contains(r.stdout, "(repaired)") {
		t.Errorf("verify --repair: %s", r)
	}
	unchanged("verify --repair")
	os.Remove(p)
	w.ok("verify", "--repair")

	p = link("workdir")
	for _, args := range [][]string{{"run", "hello"}, {"run", "--explain-scope", "hello"}} {
		r := w.mur(args...)
		if r.code == 0 || !strings.Contains(r.stderr, "mur: denied: "+p+" is a symlink to "+outside) {
			t.Errorf("mur %s with workdir/ a symlink: %s", strings.Join(args, " "), r)
		}
	}
	unchanged("run")

	// A --workdir the user names may go through a symlink, and --explain-scope shows where it
	// really is.
	real := t.TempDir()
	via := filepath.Join(t.TempDir(), "via")
	os.Symlink(real, via)
	r := w.ok("run", "--workdir", via, "--explain-scope", "hello")
	if !regexp.MustCompile(`(?m)^  /\s+-> ` + regexp.QuoteMeta(real) + ` \(read-write\)$`).MatchString(r.stdout) {
		t.Errorf("--explain-scope does not show the real workdir %s:\n%s", real, r.stdout)
	}
	w.ok("run", "--workdir", via, "hello")
}

// memoryBudgetMiB is what `mur run` may use beyond the guest's own memory.
const memoryBudgetMiB = 128

// guestMemory reads the grow guest's report of its own memory.
var guestMemory = regexp.MustCompile(`guest memory (\d+) MiB`)

// TestRunMemoryTracksGuest: mur's peak RSS follows the memory the guest really uses, for a guest
// that grows to 1 GiB under a 2 GiB cap and for one that stays small under the default cap.
func TestRunMemoryTracksGuest(t *testing.T) {
	t.Parallel()
	grow := guesttest.Build(t, "grow")
	for _, c := range []struct{ caps, mib string }{
		{"  limits: { memory_mib: 2048 }\n", "1024"},
		{"", "16"}, // the default cap
	} {
		w := sandboxWorld(t, c.caps, map[string][]byte{"grow": grow})
		w.ok("pull")
		var out bytes.Buffer
		cmd := w.cmd("run", "grow", "--", c.mib)
		cmd.Stdout = &out
		peak := runPeak(t, cmd)
		m := guestMemory.FindStringSubmatch(out.String())
		if m == nil {
			t.Fatalf("grow %s: %s", c.mib, out.String())
		}
		guest, _ := strconv.ParseFloat(m[1], 64)
		t.Logf("grow %s MiB: guest memory %.0f MiB, mur peak RSS %.0f MiB", c.mib, guest, peak)
		if peak > guest+memoryBudgetMiB {
			t.Errorf("grow %s: peak RSS %.0f MiB, more than the guest's %.0f MiB + %d MiB", c.mib, peak, guest, memoryBudgetMiB)
		}
	}
}
