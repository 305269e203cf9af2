//go:build unix

package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
	"github.com/murmur-nexus/mur/internal/manifest"
	"github.com/murmur-nexus/mur/internal/slowdown/deadline"
)

// raceSeconds bounds each race test's guests.
const raceSeconds = "1"

// TestRaceReadOnlyThroughSwappedName: one guest swaps the name x between a folder and a symlink
// to the read-only docs/ while another guest of the same capsule appends to x/secret.txt. The
// read-only decision is made on the folders the walk really opened, so no byte of docs/ changes.
func TestRaceReadOnlyThroughSwappedName(t *testing.T) {
	t.Parallel()
	r := sharedRunner(t)
	wasm := goGuest(t)
	w := newWorld(t)
	c := w.capsule(t, capsuleYAML("  filesystem: { scope: \".\", read_only: [docs] }\n"))
	wd := filepath.Join(w.project, "workdir")
	for _, d := range []string{"docs", "x"} {
		if err := os.MkdirAll(filepath.Join(wd, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(wd, "docs", "secret.txt"), []byte("read only\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("docs", filepath.Join(wd, "lnk")); err != nil {
		t.Fatal(err)
	}
	docsBefore := snapshot(t, filepath.Join(wd, "docs"))
	rootBefore := snapshot(t, w.root)

	var wg sync.WaitGroup
	var swapper result
	wg.Add(1)
	go func() {
		defer wg.Done()
		swapper, _ = runPlan(t, r, w.input(c, "grep"), wasm, "swap", raceSeconds, "x", "lnk", "x.spare")
	}()
	writer, err := runPlan(t, r, w.input(c, "cat"), wasm, "append", raceSeconds, "x/secret.txt")
	wg.Wait()
	if err != nil || swapper.err != nil {
		t.Fatalf("writer: %v %s; swapper: %v %s", err, writer.stderr, swapper.err, swapper.stderr)
	}
	t.Logf("writer: %s swapper: %s", strings.TrimSpace(writer.stdout), strings.TrimSpace(swapper.stdout))

	sameSnapshot(t, "docs/", docsBefore, snapshot(t, filepath.Join(wd, "docs")))
	// Outside the workdir nothing changed; inside it, only x/secret.txt is new.
	after := snapshot(t, w.root)
	for k := range after {
		if strings.HasPrefix(k, filepath.Join("project", "workdir", "x")) {
			delete(after, k)
		}
	}
	for k := range rootBefore {
		if strings.HasPrefix(k, filepath.Join("project", "workdir", "x")) {
			delete(rootBefore, k)
		}
	}
	sameSnapshot(t, "the world", rootBefore, after)
	if !strings.HasPrefix(writer.stdout, "appended ") || strings.HasPrefix(writer.stdout, "appended 0 ") {
		t.Errorf("the writer never wrote through x, so the race was not run: %s", writer.stdout)
	}
}

// TestRaceRootSwappedForALink: one guest (scope ".") turns a folder of its workdir into a
// symlink to the project and back, in a loop, while guests of the same capsule whose root is
// that folder are launched again and again: one narrowed to it by filesystem.scope, and one
// given it as --workdir. Each launch mounts the folder it checked, or is refused: none ever sees
// or writes beside murmur.lock.
func TestRaceRootSwappedForALink(t *testing.T) {
	t.Parallel()
	narrowed := "  - name: acme/cat\n    version: \"1.0.0\"\n    capabilities:\n      filesystem: { scope: sub }\n"
	for _, tc := range []struct {
		name   string
		caps   []string
		folder string // the name the first guest flips, in its workdir
		input  func(w *world, c *manifest.Capsule) PlanInput
	}{
		{"narrowed scope", []string{"  - name: acme/grep\n    version: \"1.0.0\"\n", narrowed}, "sub",
			func(w *world, c *manifest.Capsule) PlanInput { return w.input(c, "cat") }},
		{"--workdir in another guest's workdir", nil, "wd",
			func(w *world, c *manifest.Capsule) PlanInput {
				in := w.input(c, "cat")
				in.Workdir = filepath.Join(w.project, "workdir", "wd")
				return in
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := sharedRunner(t)
			wasm := goGuest(t)
			w := newWorld(t)
			c := w.capsule(t, capsuleYAML("  filesystem: { scope: \".\" }\n", tc.caps...))
			if err := os.WriteFile(filepath.Join(w.project, "murmur.lock"), []byte("lock_version: 3\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			wd := filepath.Join(w.project, "workdir")
			if err := os.MkdirAll(filepath.Join(wd, tc.folder), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("..", filepath.Join(wd, "uplink")); err != nil {
				t.Fatal(err)
			}
			projectBefore := snapshot(t, w.project)

			done := make(chan result, 1)
			go func() {
				res, _ := runPlan(t, r, w.input(c, "grep"), wasm, "flip", raceSeconds, tc.folder, "uplink")
				done <- res
			}()
			launched, ran, refused, escaped := 0, 0, 0, 0
			var failed []error
			var swapper result
		loop:
			for {
				select {
				case swapper = <-done:
					break loop
				default:
				}
				launched++
				var err error
				if launched%16 == 0 {
					// Now and then the whole launch, the guest probing its root.
					var res result
					if res, err = runPlan(t, r, tc.input(w, c), wasm, "probe", "murmur.lock"); err == nil && res.code == 0 {
						ran++
						if res.stdout != "murmur.lock absent\n" {
							escaped++
						}
					}
				} else {
					// In between, what a launch opens, many times faster, so that the race is
					// hit often: the folder it would mount must never be the project's.
					var p *Plan
					if p, err = BuildPlan(tc.input(w, c)); err == nil {
						var fsys *rootFS
						if fsys, err = p.open(); err == nil {
							ran++
							if heldPath(fsys.work.dir) == w.project {
								escaped++
							}
							fsys.Close()
						}
					}
				}
				switch {
				case err == nil:
				case errs.TokenOf(err) == errs.Denied:
					refused++
				default:
					failed = append(failed, err)
				}
			}
			t.Logf("%d launches: %d ran, %d refused; swapper: %s", launched, ran, refused, strings.TrimSpace(swapper.stdout))
			if escaped > 0 {
				t.Errorf("%d of %d launches rooted at %s opened the project instead", escaped, ran, tc.folder)
			}
			if len(failed) > 0 {
				t.Errorf("%d launches failed other than by refusal, the first with: %v", len(failed), failed[0])
			}
			if swapper.err != nil || !strings.HasPrefix(swapper.stdout, "flipped ") || strings.HasPrefix(swapper.stdout, "flipped 0 ") || launched == 0 {
				t.Fatalf("the race was not run: swapper %v %q, %d launches", swapper.err, swapper.stdout, launched)
			}
			after := snapshot(t, w.project)
			for _, snap := range []map[string]string{after, projectBefore} {
				for k := range snap {
					if strings.HasPrefix(k, "workdir"+string(filepath.Separator)) {
						delete(snap, k)
					}
				}
			}
			sameSnapshot(t, "the project", projectBefore, after)
		})
	}
}

// TestRunPlanJudgesByNameBeforeCreating: a --workdir that is fine when the plan is built but,
// by the time it runs, names a folder inside tools/ (here through a symlink the user's path
// goes through) is refused before anything is created there.
func TestRunPlanJudgesByNameBeforeCreating(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	c := w.capsule(t, capsuleYAML(""))
	via := filepath.Join(t.TempDir(), "via")
	if err := os.Symlink(t.TempDir(), via); err != nil {
		t.Fatal(err)
	}
	in := w.input(c, "grep")
	in.Workdir = filepath.Join(via, "wd")
	p, err := BuildPlan(in)
	if err != nil {
		t.Fatal(err)
	}
	tools := filepath.Join(w.project, "tools")
	if err := os.Mkdir(tools, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(via); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(tools, via); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, w.root)
	_, err = sharedRunner(t).RunPlan(deadline.Context(t), p, goGuest(t), []string{"paths", "x"}, Stdio{})
	errtest.WantToken(t, err, errs.Denied, "tools")
	sameSnapshot(t, "a refused RunPlan", before, snapshot(t, w.root))
}
