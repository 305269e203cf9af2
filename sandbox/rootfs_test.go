//go:build unix

package sandbox

import (
	"fmt"
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

// TestRootFSConfinementWithoutReadOnlySubtrees: with no read-only subtree to look after, every
// path is still walked inside the root, in a writable root and in a read-only one: symlinks
// already there lead nowhere outside, and nothing outside changes.
func TestRootFSConfinementWithoutReadOnlySubtrees(t *testing.T) {
	t.Parallel()
	for _, readOnly := range []bool{false, true} {
		t.Run(fmt.Sprintf("read-only=%v", readOnly), func(t *testing.T) {
			f := newEscapeFixture(t)
			for name, target := range map[string]string{"abs-etc": "/etc", "updir": "..", "deep": "ro/../../outside"} {
				if err := os.Symlink(target, filepath.Join(f.work, name)); err != nil {
					t.Fatal(err)
				}
			}
			before := snapshot(t, f.base)
			fsys := openFS(t, f.work, readOnly)
			const w = experimentalsys.O_WRONLY | experimentalsys.O_CREAT
			escapes := []string{"prelink/secret.txt", "prelink-rel/secret.txt", "abs-etc/passwd", "updir/outside/secret.txt", "deep/secret.txt", "prelink", "abs-etc"}
			for _, p := range escapes {
				_, e := fsys.OpenFile(p, experimentalsys.O_RDONLY, 0)
				wantErrno(t, "open "+p, e, experimentalsys.EPERM)
				_, e = fsys.Stat(p)
				wantErrno(t, "stat "+p, e, experimentalsys.EPERM)
				if _, e = fsys.OpenFile(p, w|experimentalsys.O_TRUNC, 0o644); e == 0 {
					t.Errorf("open %s for writing succeeded", p)
				}
				if e := fsys.Chmod(p, 0o777); e == 0 {
					t.Errorf("chmod %s succeeded", p)
				}
				if e := fsys.Utimens(p, 0, 0); e == 0 {
					t.Errorf("utimens %s succeeded", p)
				}
			}
			for _, p := range []string{"prelink/new", "updir/outside/new", "abs-etc/new"} {
				if e := fsys.Mkdir(p, 0o755); e == 0 {
					t.Errorf("mkdir %s succeeded", p)
				}
				if _, e := fsys.OpenFile(p, w|experimentalsys.O_EXCL, 0o644); e == 0 {
					t.Errorf("create %s succeeded", p)
				}
			}
			for _, c := range [][2]string{{"victim.txt", "prelink/victim.txt"}, {"victim.txt", "updir/victim.txt"}, {"prelink/secret.txt", "stolen.txt"}} {
				if e := fsys.Rename(c[0], c[1]); e == 0 {
					t.Errorf("rename %s to %s succeeded", c[0], c[1])
				}
			}
			if e := fsys.Unlink("prelink/secret.txt"); e == 0 {
				t.Error("unlink through a symlink succeeded")
			}
			wantErrno(t, "symlink", fsys.Symlink("../outside", "made"), experimentalsys.EPERM)
			wantErrno(t, "link", fsys.Link("inside.txt", "hl"), experimentalsys.EPERM)
			sameSnapshot(t, "host", before, snapshot(t, f.base))

			// What the root does hold is there to use.
			rf, e := fsys.OpenFile("inside.txt", experimentalsys.O_RDONLY, 0)
			if e != 0 {
				t.Fatalf("open inside.txt: %v", e)
			}
			rf.Close()
			_, e = fsys.OpenFile("new.txt", w, 0o644)
			if readOnly {
				wantErrno(t, "create in a read-only root", e, experimentalsys.EROFS)
			} else if e != 0 {
				t.Errorf("create in a writable root: %v", e)
			}
		})
	}
}

// TestRootFSRoutesStateByComponent: the first component state/ leads into the store, and only
// as a whole component; the store's own folder can't be moved, removed or loosened, nothing
// crosses between the store and the workdir, and a symlink in the workdir does not lead into
// the store or out of it.
func TestRootFSRoutesStateByComponent(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	work, store := filepath.Join(base, "work"), filepath.Join(base, "store")
	for _, d := range []string{work, store} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("state", filepath.Join(work, "s")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..", filepath.Join(store, "up")); err != nil {
		t.Fatal(err)
	}
	fsys := openFSWithStore(t, work, store, false)
	create := func(p string) experimentalsys.Errno {
		f, e := fsys.OpenFile(p, experimentalsys.O_WRONLY|experimentalsys.O_CREAT, 0o644)
		if e == 0 {
			f.Write([]byte(p))
			f.Close()
		}
		return e
	}
	for _, p := range []string{"state/x", "/state/y", "./state/z", "stateful.txt", "stateX.txt", "state-notes", "/state.txt"} {
		wantErrno(t, "create "+p, create(p), 0)
	}
	wantErrno(t, "create through a workdir symlink named for the store", create("s/w"), experimentalsys.ENOENT)
	wantErrno(t, "create through a store symlink out of it", create("state/up/work/v"), experimentalsys.EPERM)
	if got, want := dirContents(t, store), "map[x:state/x y:/state/y z:./state/z]"; fmt.Sprint(got) != want {
		t.Errorf("store = %v, want %s", got, want)
	}
	if got, want := dirContents(t, work), "map[state-notes:state-notes state.txt:/state.txt stateX.txt:stateX.txt stateful.txt:stateful.txt]"; fmt.Sprint(got) != want {
		t.Errorf("workdir = %v, want %s", got, want)
	}

	wantErrno(t, "mkdir state", fsys.Mkdir("state", 0o755), experimentalsys.EEXIST)
	wantErrno(t, "rmdir state", fsys.Rmdir("state"), experimentalsys.EPERM)
	wantErrno(t, "unlink state", fsys.Unlink("state"), experimentalsys.EISDIR)
	wantErrno(t, "rename state away", fsys.Rename("state", "elsewhere"), experimentalsys.EPERM)
	wantErrno(t, "rename onto state", fsys.Rename("stateX.txt", "state"), experimentalsys.EPERM)
	wantErrno(t, "chmod state", fsys.Chmod("state", 0o777), experimentalsys.EPERM)
	wantErrno(t, "rename out of the store", fsys.Rename("state/x", "x"), experimentalsys.ENOSYS)
	wantErrno(t, "rename into the store", fsys.Rename("stateX.txt", "state/X.txt"), experimentalsys.ENOSYS)
	wantErrno(t, "rename inside the store", fsys.Rename("state/x", "state/x2"), 0)
	if st, e := fsys.Stat("state"); e != 0 || !st.Mode.IsDir() {
		t.Errorf("stat state = %v, %v", st.Mode, e)
	}
	if fi, _ := os.Stat(store); fi.Mode().Perm() != 0o700 {
		t.Errorf("the store is %v", fi.Mode().Perm())
	}

	// Without a store, state/ is just a folder of the workdir.
	if err := os.Mkdir(filepath.Join(work, "state"), 0o755); err != nil {
		t.Fatal(err)
	}
	plain := openFS(t, work, false)
	f, e := plain.OpenFile("state/k", experimentalsys.O_WRONLY|experimentalsys.O_CREAT, 0o644)
	if e != 0 {
		t.Fatal(e)
	}
	f.Close()
	if _, err := os.Stat(filepath.Join(work, "state", "k")); err != nil {
		t.Errorf("state/k without a store: %v", err)
	}
}
