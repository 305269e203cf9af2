package fetch_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
	"github.com/murmur-nexus/mur/internal/ref"
)

// murmur.yaml keeps its permissions through the edits mur makes to it.
func TestDeclaringKeepsMurmurYAMLsPermissions(t *testing.T) {
	w := newWorld(t)
	layout := pulltest.LayoutStore(t)
	pulltest.Push(t, layout, grep, "1.0.0", "any", pulltest.Pack(t, "grep", "1.0.0", 71))
	pulltest.Push(t, layout, grep, "1.1.0", "any", pulltest.Pack(t, "grep", "1.1.0", 72))
	in := intentOf(t, w, "name: p\n")
	if err := os.Chmod(in.Path, 0o600); err != nil {
		t.Fatal(err)
	}
	p := w.puller(layout)
	wantPrivate := func(what string) {
		t.Helper()
		fi, err := os.Stat(in.Path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Fatalf("after %s murmur.yaml is %v, want -rw-------", what, fi.Mode().Perm())
		}
	}
	// A pull of what murmur.yaml does not declare declares it.
	if _, err := p.PullProject(t.Context(), w.Proj, in, []pull.Request{pulltest.Req(grep, "1.0.0")}, fetch.SyncOptions{Args: true}); err != nil {
		t.Fatal(err)
	}
	wantPrivate("a pull that declares")
	// mur add of another version moves the entry.
	in = intentOf(t, w, mustRead(t, in.Path))
	if _, err := p.PullProject(t.Context(), w.Proj, in, []pull.Request{pulltest.Req(grep, "1.1.0")}, fetch.SyncOptions{Args: true, Add: true}); err != nil {
		t.Fatal(err)
	}
	wantPrivate("mur add")
	if !strings.Contains(mustRead(t, in.Path), "1.1.0") {
		t.Fatalf("mur add did not declare 1.1.0:\n%s", mustRead(t, in.Path))
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

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
