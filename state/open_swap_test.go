//go:build unix

package state

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/murmur-nexus/mur/internal/errs"
)

// A local writer who swaps the store, or the state folder itself, for a symlink to a folder
// elsewhere between Open's checks and its use gets a denied error, and the folder the link points
// at is neither chmodded, created in, nor handed back to be mounted (issue 22, item 17).
func TestOpenRefusesAStoreSwappedAfterItsCheck(t *testing.T) {
	for _, swap := range []string{"store", "state folder"} {
		t.Run(swap, func(t *testing.T) {
			base := t.TempDir()
			root := filepath.Join(base, "state")
			store := filepath.Join(root, "notes")
			if err := os.MkdirAll(store, 0o700); err != nil {
				t.Fatal(err)
			}
			outside := filepath.Join(base, "outside")
			if err := os.MkdirAll(filepath.Join(outside, "notes"), 0o755); err != nil {
				t.Fatal(err)
			}
			victim := map[string]string{"store": store, "state folder": root}[swap]
			target := map[string]string{"store": filepath.Join(outside, "notes"), "state folder": outside}[swap]
			ran := false
			openCheckedHook = func() {
				ran = true
				if err := os.Rename(victim, victim+"-moved"); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(target, victim); err != nil {
					t.Fatal(err)
				}
			}
			defer func() { openCheckedHook = nil }()
			f, err := Open(root, "notes")
			if !ran {
				t.Fatal("the hook never ran")
			}
			if err == nil {
				f.Close()
			}
			if errs.TokenOf(err) != errs.Denied {
				t.Fatalf("Open through a swapped %s: %v, want denied", swap, err)
			}
			for _, p := range []string{outside, filepath.Join(outside, "notes")} {
				if m := mode(t, p); m != 0o755 {
					t.Errorf("%s was chmodded to %o through the link", p, m)
				}
			}
			if ents, _ := os.ReadDir(outside); len(ents) != 1 {
				t.Errorf("something was made in the folder outside: %v", ents)
			}
		})
	}
}
