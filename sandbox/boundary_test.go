//go:build unix

package sandbox

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
	"github.com/murmur-nexus/mur/internal/slowdown/deadline"
	"github.com/murmur-nexus/mur/sandbox/guesttest"
)

// The trust boundaries of a run, as an attacker tries them: guests of either runtime naming
// paths that only look like state/ or a read-only subtree, a cloned project whose own folders are
// symlinks, and two guests of one capsule racing each other. Every test here goes through
// BuildPlan and RunPlan, as `mur run` does.

// runPlan builds the plan of in and runs wasm under it, as `mur run` does.
func runPlan(t *testing.T, r *Runner, in PlanInput, wasm []byte, args ...string) (result, error) {
	t.Helper()
	p, err := BuildPlan(in)
	if err != nil {
		return result{}, err
	}
	var out, errb bytes.Buffer
	code, err := r.RunPlan(deadline.Context(t), p, wasm, args, Stdio{Stdout: &out, Stderr: &errb})
	return result{code, err, out.String(), errb.String()}, err
}

// verdicts reads "<path> ok" and "<path> ERR <error>" lines.
func verdicts(stdout string) map[string]string {
	out := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(stdout))
	for sc.Scan() {
		p, v, _ := strings.Cut(sc.Text(), " ")
		out[p] = v
	}
	return out
}

// dirContents maps each regular file under dir (relative slash path) to its content.
func dirContents(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			b, _ := os.ReadFile(p)
			out[filepath.ToSlash(rel)] = string(b)
		}
		return nil
	})
	return out
}

// TestPathsReachTheirFolderGoAndC: with state granted and docs/ read-only, every spelling of
// state/<file> reaches the store, and names that merely start with "state" or "docs" stay in
// the workdir, from a Go guest and from a C guest built against wasi-libc. A Go guest used to
// pick among preopens by string prefix: "/stateful.txt" became "ful.txt" in the store.
func TestPathsReachTheirFolderGoAndC(t *testing.T) {
	t.Parallel()
	paths := []string{
		"state/a", "/state/b", "./state/c", "state//d",
		"stateX.txt", "/stateful.txt", "./state-notes", "state.txt",
		"docsX.txt", "/docs-notes.txt", "docs/new.txt", "/docs/new2.txt",
	}
	guests := []struct {
		name string
		wasm func(t *testing.T) []byte
		args []string
	}{
		{"go", func(t *testing.T) []byte { return goGuest(t) }, []string{"paths"}},
		{"c", func(t *testing.T) []byte { return guesttest.BuildC(t, "paths") }, nil},
	}
	for _, g := range guests {
		t.Run(g.name, func(t *testing.T) {
			r := sharedRunner(t)
			wasm := g.wasm(t)
			w := newWorld(t)
			c := w.capsule(t, capsuleYAML("  filesystem: { scope: \".\", read_only: [docs] }\n  state: {}\n"))
			res, err := runPlan(t, r, w.input(c, "grep"), wasm, append(g.args, paths...)...)
			if err != nil || res.code != 0 {
				t.Fatalf("run = %d, %v\n%s%s", res.code, err, res.stdout, res.stderr)
			}
			v := verdicts(res.stdout)
			for _, p := range paths {
				wantOK := !strings.Contains(p, "docs/")
				if got := v[p]; (got == "ok") != wantOK {
					t.Errorf("%s: %q, want ok %v", p, got, wantOK)
				}
			}
			store := dirContents(t, filepath.Join(w.home, "state", "demo"))
			wantStore := map[string]string{"a": "state/a", "b": "/state/b", "c": "./state/c", "d": "state//d"}
			if fmt.Sprint(store) != fmt.Sprint(wantStore) {
				t.Errorf("the store holds %v, want %v", store, wantStore)
			}
			work := dirContents(t, filepath.Join(w.project, "workdir"))
			wantWork := map[string]string{
				"stateX.txt": "stateX.txt", "stateful.txt": "/stateful.txt", "state-notes": "./state-notes", "state.txt": "state.txt",
				"docsX.txt": "docsX.txt", "docs-notes.txt": "/docs-notes.txt",
			}
			if fmt.Sprint(work) != fmt.Sprint(wantWork) {
				t.Errorf("the workdir holds %v, want %v", work, wantWork)
			}
		})
	}
}

// TestProjectSymlinksAreRefused: a cloned project whose own folders are symlinks, or whose
// scope leads out of the workdir, is refused with the symlink and its target named, by
// BuildPlan and again by RunPlan (for a link that appears after the plan was built), and
// nothing outside is touched.
func TestProjectSymlinksAreRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, caps string
		link       string // relative to the project
		target     func(outside string) string
	}{
		{"workdir to an absolute folder", "", "workdir", func(o string) string { return o }},
		{"workdir to a relative folder", "", "workdir", func(string) string { return "../outside" }},
		{"tools", "", "tools", func(o string) string { return o }},
		{".murmur", "", ".murmur", func(o string) string { return o }},
		{"scope out of the workdir", "  filesystem: { scope: data }\n", "workdir/data", func(string) string { return "../../outside" }},
		{"scope to an absolute folder", "  filesystem: { scope: data }\n", "workdir/data", func(o string) string { return o }},
		{"scope deeper, through a link", "  filesystem: { scope: data/sub }\n", "workdir/data", func(string) string { return "../.." }},
		{"read-only subtree out of the workdir", "  filesystem: { scope: \".\", read_only: [docs] }\n", "workdir/docs", func(string) string { return "../../outside" }},
	}
	r := sharedRunner(t)
	wasm := goGuest(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			outside := filepath.Join(w.root, "outside")
			if err := os.MkdirAll(outside, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(outside, "key.txt"), []byte("key"), 0o600); err != nil {
				t.Fatal(err)
			}
			c := w.capsule(t, capsuleYAML(tt.caps))
			in := w.input(c, "grep")
			link := filepath.Join(w.project, tt.link)
			target := tt.target(outside)
			plant := func() {
				if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(target, link); err != nil {
					t.Fatal(err)
				}
			}
			wantRefusal := func(err error) {
				t.Helper()
				errtest.WantToken(t, err, errs.Denied, link, target)
			}

			// Planted before the plan.
			plant()
			before := snapshot(t, w.root)
			_, err := BuildPlan(in)
			wantRefusal(err)
			sameSnapshot(t, "BuildPlan", before, snapshot(t, w.root))

			// Planted after the plan was built, before it runs.
			if err := os.Remove(link); err != nil {
				t.Fatal(err)
			}
			p, err := BuildPlan(in)
			if err != nil {
				t.Fatal(err)
			}
			plant()
			before = snapshot(t, outside)
			var out bytes.Buffer
			status, err := r.RunPlan(deadline.Context(t), p, wasm, []string{"paths", "key.txt", "pwned.txt"}, Stdio{Stdout: &out})
			wantRefusal(err)
			if status != StatusRunnerFailed {
				t.Errorf("status %d, want %d", status, StatusRunnerFailed)
			}
			if out.Len() != 0 {
				t.Errorf("the guest ran: %s", out.String())
			}
			sameSnapshot(t, "outside", before, snapshot(t, outside))
		})
	}
}

// TestExplainShowsRealPaths: the plan names folders by where they really are, not by the
// symlinked path that reached them.
func TestExplainShowsRealPaths(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	c := w.capsule(t, capsuleYAML("  state: {}\n"))
	links := t.TempDir()
	// The project itself reached through a symlink (the user's own choice of path).
	if err := os.Symlink(w.project, filepath.Join(links, "proj")); err != nil {
		t.Fatal(err)
	}
	in := w.input(c, "grep")
	in.ProjectDir = filepath.Join(links, "proj")
	p, err := BuildPlan(in)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(realPath(w.project), "workdir")
	if p.Workdir != want || p.Preopens[0].HostPath != want {
		t.Errorf("workdir %s, root %s; want the real %s", p.Workdir, p.Preopens[0].HostPath, want)
	}
	// A --workdir reached through a symlink, and a state folder too.
	real := filepath.Join(t.TempDir(), "real-wd")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(links, "wd")); err != nil {
		t.Fatal(err)
	}
	in.Workdir = filepath.Join(links, "wd")
	realHome := filepath.Join(t.TempDir(), "home")
	if err := os.MkdirAll(filepath.Join(realHome, "state"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(realHome, filepath.Join(links, "home")); err != nil {
		t.Fatal(err)
	}
	in.Home, in.StateDir = filepath.Join(links, "home"), filepath.Join(links, "home", "state")
	if p, err = BuildPlan(in); err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	p.Explain(&sb)
	for _, want := range []string{"/          -> " + realPath(real) + " (read-write)", "/state   -> " + filepath.Join(realPath(realHome), "state", "demo")} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("Explain does not show %q:\n%s", want, sb.String())
		}
	}
	if strings.Contains(sb.String(), links) {
		t.Errorf("Explain shows a symlinked path:\n%s", sb.String())
	}
}
