//go:build unix

package safefile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestStampAndLinks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	before := Stamp(fi)
	if n, ok := Links(fi); !ok || n != 1 {
		t.Fatalf("Links = %d, %v; want 1", n, ok)
	}
	if err := os.Link(p, filepath.Join(dir, "g")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("two"), 0o600); err != nil {
		t.Fatal(err)
	}
	if fi, err = os.Lstat(p); err != nil {
		t.Fatal(err)
	}
	if n, ok := Links(fi); !ok || n != 2 {
		t.Fatalf("Links after a hard link = %d, %v; want 2", n, ok)
	}
	if after := Stamp(fi); before == "" || after == before {
		t.Fatalf("Stamp before and after a write: %q, %q", before, after)
	}
}
