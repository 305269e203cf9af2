package state

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/murmur-nexus/mur/internal/errs"
)

// A store a run holds is refused, not removed from under the guest; once the run ends it goes,
// with everything in it, and the listing no longer shows it.
func TestRemoveRefusesAHeldStore(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "state")
	dir, err := Ensure(root, "daily")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("twelve bytes"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Ensure(root, "other"); err != nil {
		t.Fatal(err)
	}
	stores, err := List(root)
	if err != nil || len(stores) != 2 || stores[0].Name != "daily" || stores[0].Bytes != 12 || stores[0].Files != 1 {
		t.Fatalf("List = %+v, %v", stores, err)
	}
	release, err := Hold(context.Background(), root, "daily")
	if err != nil {
		t.Fatal(err)
	}
	if err := Remove(root, "daily"); errs.TokenOf(err) != errs.LockConflict {
		t.Fatalf("Remove of a held store: %v, want lock-conflict", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "notes.txt")); err != nil {
		t.Fatalf("the held store lost its file: %v", err)
	}
	release()
	if err := Remove(root, "daily"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the store is still there: %v", err)
	}
	if stores, _ := List(root); len(stores) != 1 || stores[0].Name != "other" {
		t.Fatalf("List after Remove = %+v", stores)
	}
	if err := Remove(root, "othr"); errs.TokenOf(err) != errs.NotFound || !strings.Contains(errs.Message(err), "did you mean other?") {
		t.Fatalf("Remove of a missing store: %v", err)
	}
	// A name is one folder of the state root, never a path out of it.
	outside := filepath.Join(filepath.Dir(root), "keep")
	if err := os.Mkdir(outside, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := Remove(root, "../keep"); err == nil {
		t.Fatal("a path for a store name was accepted")
	}
	if _, err := os.Stat(outside); err != nil {
		t.Fatalf("a folder outside the state root was touched: %v", err)
	}
}

// Remove deletes only a folder mur made: a plain file or a symlink where a store should be is
// refused with denied and left as it is, and what the symlink points at is not touched.
func TestRemoveRefusesWhatIsNotAStoreFolder(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		make func(t *testing.T, path, outside string) // puts something other than a folder at path
		kind fs.FileMode                              // the type it must still have after Remove
	}{
		{"a plain file", func(t *testing.T, path, _ string) {
			if err := os.WriteFile(path, []byte("not a store"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, 0},
		{"a symlink to a folder", func(t *testing.T, path, outside string) {
			if err := os.Symlink(outside, path); err != nil {
				t.Fatal(err)
			}
		}, fs.ModeSymlink},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "state")
			if err := os.Mkdir(root, 0o700); err != nil {
				t.Fatal(err)
			}
			// outside is a folder of the user's, beside the state root, with a file in it.
			outside := filepath.Join(filepath.Dir(root), "mine")
			if err := os.Mkdir(outside, 0o700); err != nil {
				t.Fatal(err)
			}
			keep := filepath.Join(outside, "keep.txt")
			if err := os.WriteFile(keep, []byte("the user's"), 0o600); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(root, "daily")
			tt.make(t, path, outside)

			err := Remove(root, "daily")
			if errs.TokenOf(err) != errs.Denied || !strings.Contains(errs.Message(err), "is not a folder") {
				t.Fatalf("Remove of %s: %v, want denied: not a folder", tt.name, err)
			}
			fi, err := os.Lstat(path)
			if err != nil {
				t.Fatalf("%s was removed: %v", tt.name, err)
			}
			if fi.Mode().Type() != tt.kind {
				t.Fatalf("%s is now a %v", tt.name, fi.Mode().Type())
			}
			if b, err := os.ReadFile(keep); err != nil || string(b) != "the user's" {
				t.Fatalf("the folder outside the state root lost its file: %q, %v", b, err)
			}
		})
	}
}
