package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
)

// Each help example starts from the world the script set up: syncTree brings a copy an example
// changed back to the snapshot, whatever the example did to it.
func TestSyncTreeBringsTheSnapshotBack(t *testing.T) {
	t.Parallel()
	src, dst := filepath.Join(t.TempDir(), "src"), filepath.Join(t.TempDir(), "dst")
	write := func(p, s string, mode os.FileMode) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), mode); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(src, "murmur.lock"), "lock one\n", 0o644)
	write(filepath.Join(src, "cas", "blob"), "blob", 0o444)
	write(filepath.Join(src, "records", "pulls.jsonl"), "{}\n", 0o600)
	write(filepath.Join(src, "gone", "file"), "x", 0o644)
	if err := os.Symlink("murmur.lock", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	if err := syncTree(src, dst); err != nil {
		t.Fatal(err)
	}
	want := pulltest.TreeDigest(t, src)
	if got := pulltest.TreeDigest(t, dst); got != want {
		t.Fatalf("the first copy differs:\n%s\nwant\n%s", got, want)
	}

	// What examples do: rewrite a file to the same size, append, add, remove, chmod, put a
	// folder where a file was, point a link elsewhere.
	later := time.Now().Add(time.Hour)
	write(filepath.Join(dst, "murmur.lock"), "lock two\n", 0o644)
	if err := os.Chtimes(filepath.Join(dst, "murmur.lock"), later, later); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dst, "records", "pulls.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("{}\n")
	f.Close()
	write(filepath.Join(dst, "cas", "new"), "new", 0o444)
	write(filepath.Join(dst, "added", "deep", "file"), "new", 0o644)
	if err := os.RemoveAll(filepath.Join(dst, "gone")); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(dst, "gone"), "now a file", 0o644)
	if err := os.Chmod(filepath.Join(dst, "cas", "blob"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dst, "link"))
	if err := os.Symlink("cas", filepath.Join(dst, "link")); err != nil {
		t.Fatal(err)
	}

	if err := syncTree(src, dst); err != nil {
		t.Fatal(err)
	}
	if got := pulltest.TreeDigest(t, dst); got != want {
		t.Errorf("after the examples' changes, the copy is\n%s\nwant\n%s", got, want)
	}
	if target, err := os.Readlink(filepath.Join(dst, "link")); err != nil || target != "murmur.lock" {
		t.Errorf("the link points at %q (%v), want murmur.lock", target, err)
	}
}
