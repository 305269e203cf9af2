//go:build unix

package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

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
