package stage_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/fetch/stage"
	"github.com/murmur-nexus/mur/internal/errs"
)

// A local writer who swaps tools/<scope> for a symlink to a folder outside the project, at the
// moment between mur's check of the path and its use, redirects nothing: staging works through
// folder handles it holds (issue 22, item 7). The staging fails with denied, and the folder
// outside, which holds a tool-shaped folder of the same name, is exactly as it was.
func TestStagingSwapTouchesNothingOutside(t *testing.T) {
	// Not parallel: the hooks are the package's.
	for _, when := range []struct {
		name string
		hook func(func()) func()
	}{
		{"after the check", stage.OnChecked},
		{"before the rename", stage.OnInstall},
	} {
		t.Run(when.name, func(t *testing.T) {
			w := pulltest.NewWorld(t)
			d1 := w.Ingest(pulltest.Pack(t, "grep", "1.0.0", 641))
			d2 := w.Ingest(pulltest.Pack(t, "grep", "2.0.0", 642))
			if _, err := stage.Stage(w.Proj.Tools(), w.CAS, grep, d1); err != nil {
				t.Fatal(err)
			}

			outside := filepath.Join(filepath.Dir(w.Proj.Dir), "outside")
			victim := filepath.Join(outside, "grep", "keep.txt")
			must(t, os.MkdirAll(filepath.Dir(victim), 0o755))
			must(t, os.WriteFile(victim, []byte("mine"), 0o644))
			scope := filepath.Join(w.Proj.ToolsDir(), "acme")
			var once sync.Once
			swapped := false
			defer when.hook(func() {
				once.Do(func() {
					must(t, os.Rename(scope, scope+"-moved"))
					must(t, os.Symlink(outside, scope))
					swapped = true
				})
			})()

			_, err := stage.Stage(w.Proj.Tools(), w.CAS, grep, d2)
			if !swapped {
				t.Fatalf("the hook never ran (stage: %v): the test no longer reaches the moment it means to", err)
			}
			if errs.TokenOf(err) != errs.Denied || !strings.Contains(err.Error(), scope) {
				t.Fatalf("staging through a swapped tools/acme: %v, want denied naming %s", err, scope)
			}
			ents, _ := os.ReadDir(outside)
			inner, _ := os.ReadDir(filepath.Dir(victim))
			b, rerr := os.ReadFile(victim)
			if rerr != nil || string(b) != "mine" || len(ents) != 1 || len(inner) != 1 {
				t.Fatalf("the folder outside the project changed: %v %v %q %v", ents, inner, b, rerr)
			}
		})
	}
}
