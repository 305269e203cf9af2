package stage

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/lockedfile"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/internal/safefile"
)

// Staging works through folder handles held open, never through paths looked up again: a local
// writer who swaps tools/ or tools/<scope> for a symlink between mur's check and its use (issue
// 22, item 7) then redirects nothing. The project folder is opened once as an os.Root, which no
// path can leave, and the scope folder within it once more; every mkdir, write, rename and
// removal after that is relative to one of those handles.

// checkedHook, when set by a test (export_test.go), runs between the path checks of a staging and
// the opening of its handles: the moment a racing writer would swap a folder for a symlink.
var checkedHook func()

// installHook, when set by a test, runs in install just before the staged folder is renamed into
// place, with the handles already held.
var installHook func()

// scopeHandles is a project's folder and its tools/<scope>/, held open for one staging.
type scopeHandles struct {
	tools   Tools
	proj    *os.Root
	scope   *os.Root
	rel     string   // tools/<scope>, relative to the project
	created []string // folders made for the staging, relative to the project, outermost first
}

// openScope opens the project and, in it, tools/<scope>/, making tools/ and the scope folder if
// they are missing. Each folder is opened first and then compared with what its path names
// without following a link, so a handle is always a real folder that stood at its place in the
// project.
func openScope(tools Tools, name ref.Name) (*scopeHandles, error) {
	if checkedHook != nil {
		checkedHook()
	}
	root, err := os.OpenRoot(tools.Project)
	if err != nil {
		return nil, errs.Wrap(err, errs.IO, "can't open the project folder %s: %v", tools.Project, err)
	}
	h := &scopeHandles{tools: tools, proj: root, rel: filepath.Join(filepath.Base(tools.Dir()), name.Scope)}
	for _, rel := range []string{filepath.Dir(h.rel), h.rel} {
		err := root.Mkdir(rel, 0o755)
		switch {
		case err == nil:
			h.created = append(h.created, rel)
		case !errors.Is(err, fs.ErrExist):
			h.close(true)
			return nil, stageDirError(tools, rel, err)
		}
	}
	if h.scope, err = root.OpenRoot(h.rel); err != nil {
		h.close(true)
		return nil, stageDirError(tools, h.rel, err)
	}
	if err := h.still(); err != nil {
		h.close(true)
		return nil, err
	}
	return h, nil
}

// still checks that tools/ and tools/<scope> are real folders and that the scope's path still
// names the folder whose handle is held.
func (h *scopeHandles) still() error {
	tools := h.tools
	for _, rel := range []string{filepath.Dir(h.rel), h.rel} {
		fi, err := h.proj.Lstat(rel)
		if err != nil {
			return stageDirError(tools, rel, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 || !fi.IsDir() {
			return stageDirError(tools, rel, nil)
		}
		if rel == h.rel {
			held, err := h.scope.Stat(".")
			if err != nil || !os.SameFile(fi, held) {
				return errs.New(errs.Denied, "%s was replaced by another folder while mur was staging into it, and mur changed nothing outside the folder it had opened; find what is changing tools/ and run again", filepath.Join(tools.Project, rel))
			}
		}
	}
	return nil
}

// stageDirError words a folder on the way to tools/<scope> that is a symlink, not a folder, or
// could not be opened (err; nil when only its kind is wrong).
func stageDirError(tools Tools, rel string, err error) error {
	p := filepath.Join(tools.Project, rel)
	if fi, lerr := os.Lstat(p); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
		target, _ := os.Readlink(p)
		return errs.New(errs.Denied, "%s is a symlink to %s, and mur stages tools only into real folders inside the project, so it changed nothing there; remove the symlink (its target is untouched) and run again", p, target)
	}
	if err == nil || errors.Is(err, syscall.ENOTDIR) {
		return errs.New(errs.Denied, "%s is not a folder; move it away and run again", p)
	}
	return errs.Wrap(err, errs.Denied, "can't open %s as a folder inside the project (%v); if it is a link, remove it and run again", p, err)
}

// close releases the handles and, when removeMade, removes the folders made for the staging,
// each only while it is empty: a concurrent pull may have staged its own tool there meanwhile.
func (h *scopeHandles) close(removeMade bool) {
	if h == nil {
		return
	}
	if h.scope != nil {
		h.scope.Close()
	}
	if removeMade {
		for i := len(h.created) - 1; i >= 0; i-- {
			h.proj.Remove(h.created[i])
		}
	}
	h.proj.Close()
}

// mkdirTempIn makes a new folder named prefix plus random characters in root.
func mkdirTempIn(root *os.Root, prefix string) (string, error) {
	for range 100 {
		var b [8]byte
		rand.Read(b[:])
		name := prefix + hex.EncodeToString(b[:])
		err := root.Mkdir(name, 0o755)
		if err == nil {
			return name, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", err
		}
	}
	return "", fmt.Errorf("no free temporary name in %s", root.Name())
}

// holdIn opens the folder name in root and flocks it, marking it as in use by this process:
// a staging folder whose flock can be taken belongs to a process that is gone (stage_sweep.go).
func holdIn(root *os.Root, name string) (*os.File, error) {
	return lockedfile.HoldDirIn(root, name)
}

// stampIn is stamp for the file name in root.
func stampIn(root *os.Root, name string) string {
	fi, err := root.Lstat(name)
	if err != nil {
		return ""
	}
	return safefile.Stamp(fi)
}

// writeNew writes a new file name in root, refusing one that is there already.
func writeNew(root *os.Root, name string, b []byte) error {
	f, err := root.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY|safefile.NoFollow, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// openRealDir opens the folder name in parent, and only if name is a real folder (not a
// symlink) that is the very folder opened.
func openRealDir(parent *os.Root, name string) (*os.Root, error) {
	r, err := parent.OpenRoot(name)
	if err != nil {
		return nil, err
	}
	fi, err := parent.Lstat(name)
	held, herr := r.Stat(".")
	if err != nil || herr != nil || fi.Mode()&fs.ModeSymlink != 0 || !os.SameFile(fi, held) {
		r.Close()
		return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.ELOOP}
	}
	return r, nil
}

// unstageIn removes tools/<scope>/<name>/ and its staging lock through held folder handles, and
// the scope's folder once it is empty. Missing folders are nothing to remove.
func Unstage(t Tools, name ref.Name) error {
	root, err := os.OpenRoot(t.Project)
	if err != nil {
		return errs.Wrap(err, errs.IO, "can't open the project folder %s: %v", t.Project, err)
	}
	defer root.Close()
	rel := filepath.Join(filepath.Base(t.Dir()), name.Scope)
	dir := StagedDir(t, name)
	tools, err := openRealDir(root, filepath.Dir(rel))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return stageDirError(t, filepath.Dir(rel), err)
	}
	defer tools.Close()
	scope, err := openRealDir(tools, name.Scope)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return stageDirError(t, rel, err)
	}
	defer scope.Close()
	if err := scope.RemoveAll(name.Name); err != nil {
		return errs.Wrap(err, errs.IO, "can't remove %s, which no entry of murmur.yaml declares any more: %v; remove it by hand", dir, err)
	}
	lockName := "." + name.Name + ".lock"
	if err := scope.Remove(lockName); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return errs.Wrap(err, errs.IO, "can't remove %s: %v", filepath.Join(filepath.Dir(dir), lockName), err)
	}
	_ = tools.Remove(name.Scope) // only when empty; another tool of the scope keeps it
	return nil
}
