package atomicfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteFileReplacesWhole(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "murmur.lock")
	if err := WriteFile(p, []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(p, []byte("two\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil || string(b) != "two\n" {
		t.Fatalf("content %q, %v", b, err)
	}
	st, _ := os.Stat(p)
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", st.Mode().Perm())
	}
	assertNoTemps(t, dir)
}

func TestAbortLeavesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tmp := filepath.Join(dir, "ingest")
	os.Mkdir(tmp, 0o700)
	final := filepath.Join(dir, "blob")
	f, err := Create(tmp, final, 0o444)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("partial"))
	f.Abort()
	f.Abort() // twice is harmless
	if _, err := os.Stat(final); !os.IsNotExist(err) {
		t.Fatalf("final name exists after abort: %v", err)
	}
	assertNoTemps(t, tmp)
	if err := f.Commit(); err == nil {
		t.Fatal("Commit after Abort succeeded")
	}
}

func TestCommitIntoOtherFolder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tmp := filepath.Join(dir, "ingest")
	os.Mkdir(tmp, 0o700)
	final := filepath.Join(dir, "blob")
	f, err := Create(tmp, final, 0o444)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(filepath.Base(f.Name()), TempPrefix) {
		t.Fatalf("temporary name %q lacks prefix", f.Name())
	}
	f.Write([]byte("whole"))
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(final)
	if err != nil || st.Mode().Perm() != 0o444 {
		t.Fatalf("final: %v %v", st, err)
	}
	assertNoTemps(t, tmp)
}

func TestCreateInMissingFolderFails(t *testing.T) {
	t.Parallel()
	if _, err := Create(filepath.Join(t.TempDir(), "nope"), "/x", 0o644); err == nil {
		t.Fatal("Create in a missing folder succeeded")
	}
}

func assertNoTemps(t *testing.T, dir string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), TempPrefix) {
			t.Fatalf("temporary file left behind: %s", e.Name())
		}
	}
}
