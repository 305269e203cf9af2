package state

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/murmur-nexus/mur/internal/errs"
)

// A store a run holds is refused, not removed from under the guest; once the run ends it goes,
// with everything in it, and the listing no longer shows it.
func TestRemoveRefusesAHeldStore(t *testing.T) {
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
