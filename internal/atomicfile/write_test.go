package atomicfile

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/murmur-nexus/mur/internal/atomicfile/atomicfiletest"
)

// A large write reaches the kernel WriteChunk bytes at a time, whole and in place, through each
// of the three ways in.
func TestLargeWritesGoInChunks(t *testing.T) {
	t.Parallel()
	data := bytes.Repeat([]byte("0123456789abcdef"), (1<<20+5)/16+1)[:1<<20+5]
	want := 1<<20/WriteChunk + 1
	dir := t.TempDir()
	for _, c := range []struct {
		name  string
		write func(f *File) (int, error)
		off   int
	}{
		{"Write", func(f *File) (int, error) { return Write(f.File, data) }, 0},
		{"WriteAt", func(f *File) (int, error) { return WriteAt(f.File, data, 7) }, 7},
		{"File.Write", func(f *File) (int, error) { return f.Write(data) }, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := Create("", filepath.Join(dir, c.name), 0o644)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Abort()
			before := atomicfiletest.WriteCalls(t)
			n, err := c.write(f)
			calls := atomicfiletest.WriteCalls(t) - before
			if n != len(data) || err != nil {
				t.Fatalf("wrote %d of %d bytes: %v", n, len(data), err)
			}
			if calls < want {
				t.Errorf("%d bytes went to the kernel in %d write calls, want at least %d (of %d bytes at most)", len(data), calls, want, WriteChunk)
			}
			got, _ := os.ReadFile(f.Name())
			if !bytes.Equal(got[c.off:], data) || len(got) != c.off+len(data) {
				t.Errorf("the file holds %d bytes that differ from the %d written at %d", len(got), len(data), c.off)
			}
		})
	}
}

// A write that fails part way reports the bytes that did land and the error.
func TestChunkedWriteReportsItsFailure(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "ro")
	os.WriteFile(p, nil, 0o644)
	f, err := os.Open(p) // read-only: every write fails
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data := make([]byte, 3*WriteChunk)
	for _, write := range []func() (int, error){
		func() (int, error) { return Write(f, data) },
		func() (int, error) { return WriteAt(f, data, 0) },
	} {
		n, err := write()
		var pe *fs.PathError
		if n != 0 || !errors.As(err, &pe) {
			t.Fatalf("a write to a read-only file gave %d, %v; want 0 and its *fs.PathError", n, err)
		}
	}
}

// WriteCache replaces a file whole, with the mode asked, and leaves no temporary file; where it
// can't, it fails and leaves nothing.
func TestWriteCacheReplacesWhole(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "kept.wasm")
	if err := WriteCache(p, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte{7}, 3*WriteChunk+1)
	if err := WriteCache(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(p)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes, %v; want the %d written", len(got), err, len(data))
	}
	if st, _ := os.Stat(p); st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", st.Mode().Perm())
	}
	assertNoTemps(t, dir)
	if err := WriteCache(filepath.Join(dir, "missing", "x"), data, 0o600); err == nil {
		t.Fatal("a write into a missing folder succeeded")
	}
	if err := os.Mkdir(filepath.Join(dir, "taken"), 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "taken", "x"), nil, 0o600)
	if err := WriteCache(filepath.Join(dir, "taken"), data, 0o600); err == nil {
		t.Fatal("a write over a folder that holds a file succeeded")
	}
	assertNoTemps(t, dir)
}
