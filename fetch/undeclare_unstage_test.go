package fetch_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
	"github.com/murmur-nexus/mur/internal/ref"
)

// mur rm of a tool whose tools/ folder can't be removed fails and says what to remove, instead
// of reporting it removed while its files stay.
func TestUndeclareSaysWhenToolsCanNotBeRemoved(t *testing.T) {
	st := pulltest.LayoutStore(t)
	pulltest.Push(t, st, grep, "1.0.0", "any", pulltest.Pack(t, "grep", "1.0.0", 1))
	w := newWorld(t)
	in := intentOf(t, w, "name: bot\nartifacts:\n  - name: acme/grep\n    version: \"1.0.0\"\n")
	w.mustPull(w.puller(st), pulltest.Req(grep, "1.0.0"))
	// The staging lock, in the way as a folder with something in it.
	lockDir := filepath.Join(w.Proj.ToolsDir(), "acme", ".grep.lock")
	if err := os.RemoveAll(lockDir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(lockDir, "kept"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := fetch.Undeclare(context.Background(), w.Proj, in, []ref.Name{grep}, func(string) {})
	errtest.WantToken(t, err, errs.IO, "can't remove "+lockDir)
}
