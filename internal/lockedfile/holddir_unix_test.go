//go:build unix

package lockedfile

import (
	"os"
	"path/filepath"
	"testing"
)

// A held folder can't be held again until it is closed, and a symlink is never held.
func TestHoldDirIn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "staging"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("staging", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	held, err := HoldDirIn(root, "staging")
	if err != nil {
		t.Fatal(err)
	}
	if f, err := HoldDirIn(root, "staging"); err == nil {
		f.Close()
		t.Fatal("a held folder was held again")
	}
	if f, err := HoldDirIn(root, "link"); err == nil {
		f.Close()
		t.Fatal("a symlink to the folder was held")
	}
	held.Close()
	again, err := HoldDirIn(root, "staging")
	if err != nil {
		t.Fatalf("holding the folder once it was let go: %v", err)
	}
	again.Close()
}
