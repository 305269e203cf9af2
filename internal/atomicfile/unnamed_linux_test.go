package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

// An unnamed file is nowhere until it is linked, and then whole at its name.
func TestUnnamedFileIsLinkedWhole(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f, err := OpenUnnamed(dir, 0o644)
	if err != nil {
		t.Skipf("no O_TMPFILE in %s: %v", dir, err)
	}
	defer f.Close()
	if _, err := f.Write([]byte("payload")); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("the unnamed file shows in its folder: %v", ents)
	}
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := LinkUnnamed(f, d, "named"); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "named")); err != nil || string(b) != "payload" {
		t.Fatalf("the linked file holds %q, %v", b, err)
	}
}
