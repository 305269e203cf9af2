//go:build unix

package sandbox

import (
	"io"
	"os"
	"path/filepath"
	"sort"
	"testing"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

var _ experimentalsys.FS = (*rootFS)(nil)
var _ experimentalsys.File = (*rootFile)(nil)

// openFS opens dir as a guest root with read-only subtrees ro (host paths, or relative to dir),
// as the plan would hand it over.
func openFS(t testing.TB, dir string, readOnly bool, ro ...string) *rootFS {
	t.Helper()
	return openFSWithStore(t, dir, "", readOnly, ro...)
}

// openFSWithStore is openFS with the state store folder store routed at state/ ("" for none).
func openFSWithStore(t testing.TB, dir, store string, readOnly bool, ro ...string) *rootFS {
	t.Helper()
	open := func(p string) *os.File {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	var subtrees []*os.File
	for _, sub := range ro {
		if !filepath.IsAbs(sub) {
			sub = filepath.Join(dir, sub)
		}
		subtrees = append(subtrees, open(sub))
	}
	var storeDir *os.File
	if store != "" {
		storeDir = open(store)
	}
	fsys, err := newRootFS(open(dir), readOnly, subtrees, storeDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fsys.Close() })
	return fsys
}

func wantErrno(t *testing.T, what string, got, want experimentalsys.Errno) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func TestRootFSConfinement(t *testing.T) {
	t.Parallel()
	f := newEscapeFixture(t)
	if err := os.Symlink("ro", filepath.Join(f.work, "to-ro")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(f.work, "abs-etc")); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, f.base)
	fsys := openFS(t, f.work, false, "ro")
	const w = experimentalsys.O_WRONLY | experimentalsys.O_CREAT

	for _, p := range []string{"prelink/secret.txt", "prelink-rel/secret.txt", "abs-etc/passwd", "prelink"} {
		_, e := fsys.OpenFile(p, experimentalsys.O_RDONLY, 0)
		wantErrno(t, "open "+p, e, experimentalsys.EPERM)
		_, e = fsys.Stat(p + "/")
		if e == 0 {
			t.Errorf("stat %s/ succeeded", p)
		}
	}
	wantErrno(t, "symlink", fsys.Symlink("../outside", "made"), experimentalsys.EPERM)
	wantErrno(t, "symlink inside", fsys.Symlink("inside.txt", "made"), experimentalsys.EPERM)
	wantErrno(t, "link", fsys.Link("inside.txt", "hl"), experimentalsys.EPERM)
	wantErrno(t, "rename out", fsys.Rename("victim.txt", "prelink/victim.txt"), experimentalsys.EPERM)

	for _, p := range []string{"ro/new.txt", "ro/existing.txt", "to-ro/new.txt", "to-ro/existing.txt"} {
		_, e := fsys.OpenFile(p, w, 0o644)
		wantErrno(t, "open for writing "+p, e, experimentalsys.EROFS)
	}
	_, e := fsys.OpenFile("ro/existing.txt", experimentalsys.O_RDONLY|experimentalsys.O_TRUNC, 0)
	wantErrno(t, "open O_TRUNC", e, experimentalsys.EROFS)
	wantErrno(t, "mkdir in ro", fsys.Mkdir("ro/d", 0o755), experimentalsys.EROFS)
	wantErrno(t, "mkdir via link", fsys.Mkdir("to-ro/d", 0o755), experimentalsys.EROFS)
	wantErrno(t, "unlink in ro", fsys.Unlink("ro/existing.txt"), experimentalsys.EROFS)
	wantErrno(t, "unlink via link", fsys.Unlink("to-ro/existing.txt"), experimentalsys.EROFS)
	wantErrno(t, "rmdir ro", fsys.Rmdir("ro"), experimentalsys.EROFS)
	wantErrno(t, "rename ro itself", fsys.Rename("ro", "moved"), experimentalsys.EROFS)
	wantErrno(t, "rename out of ro", fsys.Rename("ro/existing.txt", "stolen.txt"), experimentalsys.EROFS)
	wantErrno(t, "rename into ro", fsys.Rename("inside.txt", "ro/existing.txt"), experimentalsys.EROFS)
	wantErrno(t, "rename into ro via link", fsys.Rename("inside.txt", "to-ro/existing.txt"), experimentalsys.EROFS)
	wantErrno(t, "chmod in ro", fsys.Chmod("to-ro/existing.txt", 0o777), experimentalsys.EROFS)
	wantErrno(t, "utimens in ro", fsys.Utimens("ro/existing.txt", 0, 0), experimentalsys.EROFS)

	// Reading the read-only subtree through the writable mount is fine; changing it through a
	// descriptor opened for reading is not.
	rf, e := fsys.OpenFile("to-ro/existing.txt", experimentalsys.O_RDONLY, 0)
	if e != 0 {
		t.Fatalf("open ro file for reading: %v", e)
	}
	buf := make([]byte, 64)
	n, e := rf.Read(buf)
	if e != 0 || string(buf[:n]) != "read only" {
		t.Errorf("read = %q, %v", buf[:n], e)
	}
	wantErrno(t, "futimens on ro file", rf.Utimens(0, 0), experimentalsys.EROFS)
	wantErrno(t, "ftruncate on ro file", rf.Truncate(0), experimentalsys.EROFS)
	rf.Close()

	sameSnapshot(t, "host", before, snapshot(t, f.base))

	// Renaming the symlink that points at the subtree moves the link, not the subtree.
	wantErrno(t, "rename the link", fsys.Rename("to-ro", "still-ro"), 0)
	_, e = fsys.OpenFile("still-ro/new.txt", w, 0o644)
	wantErrno(t, "open for writing via renamed link", e, experimentalsys.EROFS)
}

func TestRootFSAncestorOfReadOnlySubtree(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	if err := os.MkdirAll(filepath.Join(base, "a", "b", "ro"), 0o755); err != nil {
		t.Fatal(err)
	}
	fsys := openFS(t, base, false, filepath.Join(base, "a", "b", "ro"))
	wantErrno(t, "rename grandparent", fsys.Rename("a", "z"), experimentalsys.EROFS)
	wantErrno(t, "rename parent", fsys.Rename("a/b", "a/c"), experimentalsys.EROFS)
	wantErrno(t, "mkdir sibling", fsys.Mkdir("a/b/sibling", 0o755), 0)
	wantErrno(t, "rename sibling", fsys.Rename("a/b/sibling", "a/sib"), 0)
	// The subtree's own folder, empty, can't be removed or replaced either, and the folders
	// holding it keep their mode and times.
	wantErrno(t, "rmdir the subtree", fsys.Rmdir("a/b/ro"), experimentalsys.EROFS)
	wantErrno(t, "mkdir another", fsys.Mkdir("a/other", 0o755), 0)
	wantErrno(t, "rename onto the subtree", fsys.Rename("a/other", "a/b/ro"), experimentalsys.EROFS)
	wantErrno(t, "chmod grandparent", fsys.Chmod("a", 0), experimentalsys.EROFS)
	wantErrno(t, "utimens parent", fsys.Utimens("a/b", 0, 0), experimentalsys.EROFS)
	wantErrno(t, "chmod a sibling", fsys.Chmod("a/other", 0o700), 0)
	// Opened for reading, the subtree's folder is still read-only through its descriptor.
	d, e := fsys.OpenFile("a/b/ro", experimentalsys.O_RDONLY|experimentalsys.O_DIRECTORY, 0)
	if e != 0 {
		t.Fatal(e)
	}
	wantErrno(t, "futimens on the subtree's folder", d.Utimens(0, 0), experimentalsys.EROFS)
	d.Close()
	if fi, err := os.Stat(filepath.Join(base, "a", "b", "ro")); err != nil || !fi.IsDir() || fi.ModTime().Unix() == 0 {
		t.Errorf("the subtree changed: %v %v", fi, err)
	}
}

func TestRootFSReadOnlyMount(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	fsys := openFS(t, dir, true)
	for _, fl := range []experimentalsys.Oflag{experimentalsys.O_WRONLY, experimentalsys.O_RDWR, experimentalsys.O_CREAT, experimentalsys.O_TRUNC} {
		_, e := fsys.OpenFile("f", fl, 0o644)
		wantErrno(t, "open f with write flag", e, experimentalsys.EROFS)
	}
	wantErrno(t, "mkdir", fsys.Mkdir("x", 0o755), experimentalsys.EROFS)
	wantErrno(t, "unlink", fsys.Unlink("f"), experimentalsys.EROFS)
	wantErrno(t, "rmdir", fsys.Rmdir("d"), experimentalsys.EROFS)
	wantErrno(t, "rename", fsys.Rename("f", "g"), experimentalsys.EROFS)
	wantErrno(t, "chmod", fsys.Chmod("f", 0o777), experimentalsys.EROFS)
	wantErrno(t, "utimens", fsys.Utimens("f", 0, 0), experimentalsys.EROFS)
	rf, e := fsys.OpenFile("f", experimentalsys.O_RDONLY, 0)
	if e != 0 {
		t.Fatal(e)
	}
	defer rf.Close()
	_, e = rf.Write([]byte("x"))
	if e == 0 {
		t.Error("write through a read-only descriptor succeeded")
	}
	wantErrno(t, "set append", rf.SetAppend(true), experimentalsys.EROFS)
	if b, _ := os.ReadFile(filepath.Join(dir, "f")); string(b) != "data" {
		t.Errorf("f = %q", b)
	}
}

func TestRootFSFileOperations(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fsys := openFS(t, dir, false)
	wantErrno(t, "mkdir", fsys.Mkdir("d", 0o755), 0)
	wantErrno(t, "mkdir again", fsys.Mkdir("d", 0o755), experimentalsys.EEXIST)
	f, e := fsys.OpenFile("d/f", experimentalsys.O_RDWR|experimentalsys.O_CREAT|experimentalsys.O_EXCL, 0o644)
	if e != 0 {
		t.Fatal(e)
	}
	if n, e := f.Write([]byte("hello world")); e != 0 || n != 11 {
		t.Fatalf("write = %d, %v", n, e)
	}
	if n, e := f.Pwrite([]byte("W"), 6); e != 0 || n != 1 {
		t.Fatalf("pwrite = %d, %v", n, e)
	}
	buf := make([]byte, 5)
	if n, e := f.Pread(buf, 6); e != 0 || string(buf[:n]) != "World" {
		t.Errorf("pread = %q, %v", buf[:n], e)
	}
	if off, e := f.Seek(0, io.SeekStart); e != 0 || off != 0 {
		t.Errorf("seek = %d, %v", off, e)
	}
	all := make([]byte, 32)
	if n, e := f.Read(all); e != 0 || string(all[:n]) != "hello World" {
		t.Errorf("read = %q, %v", all[:n], e)
	}
	if n, e := f.Read(all); e != 0 || n != 0 {
		t.Errorf("read at EOF = %d, %v; want 0, 0", n, e)
	}
	wantErrno(t, "truncate", f.Truncate(5), 0)
	st, e := f.Stat()
	if e != 0 || st.Size != 5 {
		t.Errorf("stat size = %d, %v", st.Size, e)
	}
	if isDir, _ := f.IsDir(); isDir {
		t.Error("file IsDir")
	}
	wantErrno(t, "set append", f.SetAppend(true), 0)
	if !f.IsAppend() {
		t.Error("IsAppend false after SetAppend(true)")
	}
	f.Seek(0, io.SeekStart)
	f.Write([]byte("!"))
	wantErrno(t, "utimens", f.Utimens(1e9, 2e9), 0)
	wantErrno(t, "close", f.Close(), 0)
	if b, _ := os.ReadFile(filepath.Join(dir, "d", "f")); string(b) != "hello!" {
		t.Errorf("file = %q, want appended write", b)
	}
	if fi, _ := os.Stat(filepath.Join(dir, "d", "f")); fi.ModTime().Unix() != 2 {
		t.Errorf("mtime = %v, want 2s after the epoch", fi.ModTime())
	}

	for _, n := range []string{"a", "b", "c"} {
		nf, e := fsys.OpenFile("d/"+n, experimentalsys.O_WRONLY|experimentalsys.O_CREAT, 0o644)
		if e != 0 {
			t.Fatal(e)
		}
		nf.Close()
	}
	d, e := fsys.OpenFile("d", experimentalsys.O_RDONLY|experimentalsys.O_DIRECTORY, 0)
	if e != 0 {
		t.Fatal(e)
	}
	readNames := func() []string {
		var names []string
		for {
			ents, e := d.Readdir(2)
			if e != 0 {
				t.Fatal(e)
			}
			for _, de := range ents {
				names = append(names, de.Name)
				if de.Ino == 0 {
					t.Errorf("%s has no inode", de.Name)
				}
			}
			if len(ents) < 2 {
				break
			}
		}
		sort.Strings(names)
		return names
	}
	if got := readNames(); len(got) != 4 || got[0] != "a" || got[3] != "f" {
		t.Errorf("readdir = %v", got)
	}
	if _, e := d.Seek(0, io.SeekStart); e != 0 {
		t.Fatal(e)
	}
	if got := readNames(); len(got) != 4 {
		t.Errorf("readdir after rewind = %v", got)
	}
	d.Close()

	if _, e := fsys.Readlink("d/a"); e != experimentalsys.EINVAL {
		t.Errorf("readlink of a file = %v, want EINVAL", e)
	}
	if _, e := fsys.Readlink("d/none"); e != experimentalsys.ENOENT {
		t.Errorf("readlink of nothing = %v, want ENOENT", e)
	}
	if err := os.Symlink("a", filepath.Join(dir, "d", "l")); err != nil {
		t.Fatal(err)
	}
	if target, e := fsys.Readlink("d/l"); e != 0 || target != "a" {
		t.Errorf("readlink = %q, %v", target, e)
	}
	wantErrno(t, "unlink the link", fsys.Unlink("d/l"), 0)
	wantErrno(t, "rename", fsys.Rename("d/a", "d/z"), 0)
	wantErrno(t, "unlink dir", fsys.Unlink("d"), experimentalsys.EISDIR)
	wantErrno(t, "rmdir file", fsys.Rmdir("d/z"), experimentalsys.ENOTDIR)
	wantErrno(t, "rmdir non-empty", fsys.Rmdir("d"), experimentalsys.ENOTEMPTY)
	for _, n := range []string{"z", "b", "c", "f"} {
		wantErrno(t, "unlink "+n, fsys.Unlink("d/"+n), 0)
	}
	wantErrno(t, "rmdir", fsys.Rmdir("d"), 0)
	_, e = fsys.Stat("d")
	wantErrno(t, "stat removed", e, experimentalsys.ENOENT)
	if _, e := fsys.Stat("."); e != 0 {
		t.Errorf("stat root: %v", e)
	}
}
