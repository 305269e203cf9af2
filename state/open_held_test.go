//go:build unix

package state

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/murmur-nexus/mur/internal/errs"
)

// TestOpenHoldsTheStore: Open returns the store it created, held: what is made through it lands
// in that folder even after its path is taken over, and a store that is a symlink is refused.
func TestOpenHoldsTheStore(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "state")
	f, err := Open(root, "notes")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dir := filepath.Join(root, "notes")
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("%s: %v %v", dir, fi, err)
	}
	if err := os.Rename(dir, dir+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Openat(int(f.Fd()), "x", unix.O_WRONLY|unix.O_CREAT|unix.O_CLOEXEC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	if _, err := os.Stat(filepath.Join(dir+".moved", "x")); err != nil {
		t.Errorf("the held store did not get the file: %v", err)
	}

	if err := os.Symlink(t.TempDir(), filepath.Join(root, "linked")); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(root, "linked"); !errors.Is(err, errs.Denied) {
		t.Errorf("Open of a symlinked store: %v", err)
	}
}
