//go:build unix

package sandbox

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/murmur-nexus/mur/internal/atomicfile"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/state"
)

// resolve finds the layout's folders and checks them. With create it makes the missing ones and
// keeps every folder open, so that the run mounts exactly what was checked; without, it creates
// nothing and holds nothing.
//
// The checks: the project's own folders (tools/, .murmur/ and the default workdir/) are not
// symlinks, which a cloned repository could point anywhere; the scope and the read-only subtrees
// are walked from the workdir one component at a time, following symlinks only while they stay
// inside it; and the scope root, judged first by its name (so that nothing is created for a
// refused root) and then on the folder actually opened, keeps the project's files and the Murmur
// home out of the guest's reach.
func (l layout) resolve(create bool) (_ *opened, err error) {
	o := &opened{}
	defer func() {
		if err != nil {
			o.close()
		}
	}()
	project := realPath(l.project)
	folders := projectFolders
	if l.defaultWorkdir {
		folders = append(folders[:len(folders):len(folders)], "workdir")
	}
	for _, name := range folders {
		if err := refuseSymlink(project, name); err != nil {
			return nil, err
		}
	}
	if err := checkReach(realPath(filepath.Join(l.workdir, filepath.FromSlash(l.scope))), project, l.home); err != nil {
		return nil, err
	}

	wd, err := l.openWorkdir(project, create)
	if err != nil {
		return nil, err
	}
	// locate finds folder rel of the workdir: its real path and, when it exists, the folder.
	locate := func(rel string, create bool) (string, *os.File, error) {
		return filepath.Join(o.workdir, filepath.FromSlash(rel)), nil, nil
	}
	if wd == nil {
		o.workdir = realPath(l.workdir)
	} else {
		wt, err := newTree(wd, false, nil)
		if err != nil {
			return nil, errs.Wrap(err, errs.IO, "can't open the workdir %s: %v; %s", l.workdir, err, workdirHint)
		}
		defer wt.close()
		o.workdir = heldPath(wt.dir)
		locate = func(rel string, create bool) (string, *os.File, error) {
			d, missing, escape, err := wt.openDir(rel, create)
			if err != nil {
				return "", nil, walkError(o.workdir, rel, escape, err)
			}
			real := filepath.Join(append([]string{heldPath(d)}, missing...)...)
			if missing != nil {
				d.Close()
				d = nil
			}
			return real, d, nil
		}
	}

	if o.root, o.rootDir, err = locate(l.scope, create); err != nil {
		return nil, err
	}
	if !create && o.rootDir != nil {
		o.rootDir.Close()
		o.rootDir = nil
	}
	// Again, on the folder that was opened.
	if err := checkReach(o.root, project, l.home); err != nil {
		return nil, err
	}

	for _, ro := range l.readOnly {
		real, d, err := locate(ro, false)
		if err != nil {
			return nil, err
		}
		switch {
		case atomicfile.Within(o.root, real):
			o.rootReadOnly = true
		case atomicfile.Within(real, o.root):
			rel, _ := filepath.Rel(o.root, real)
			o.subtrees = append(o.subtrees, Mount{GuestPath: "/" + filepath.ToSlash(rel), HostPath: real, ReadOnly: true})
			if create && d == nil {
				if _, d, err = locate(ro, true); err != nil {
					return nil, err
				}
			}
		}
		if d != nil {
			if create {
				o.roDirs = append(o.roDirs, d)
			} else {
				d.Close()
			}
		}
	}

	if l.store != "" {
		o.store = realPath(filepath.Join(l.stateDir, l.store))
		if create {
			if o.storeDir, err = state.Open(l.stateDir, l.store); err != nil {
				return nil, err
			}
			o.store = heldPath(o.storeDir)
		}
	}
	return o, nil
}

// openWorkdir opens the workdir: the default one as the project's own workdir/ folder and never
// through a symlink, one the user named (--workdir) wherever its path leads. It returns nil when
// the workdir does not exist and create is off.
func (l layout) openWorkdir(project string, create bool) (*os.File, error) {
	if !l.defaultWorkdir {
		return l.openNamedWorkdir(create)
	}
	pd, err := os.OpenFile(project, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, errs.Wrap(err, errs.IO, "can't open the project folder %s: %v", project, err)
	}
	defer pd.Close()
	pfd := int(pd.Fd())
	fd, err := unix.Openat(pfd, "workdir", dirFlags, 0)
	if err == unix.ENOENT {
		if !create {
			return nil, nil
		}
		if err = unix.Mkdirat(pfd, "workdir", 0o755); err == nil || err == unix.EEXIST {
			fd, err = unix.Openat(pfd, "workdir", dirFlags, 0)
		}
	}
	wd := filepath.Join(project, "workdir")
	switch {
	case err == nil:
		return os.NewFile(uintptr(fd), wd), nil
	case err == unix.ELOOP || err == unix.ENOTDIR:
		if err := refuseSymlink(project, "workdir"); err != nil {
			return nil, err
		}
		return nil, errs.New(errs.Denied, "%s is not a folder; move it away, or pass --workdir", wd)
	}
	return nil, errs.Wrap(err, errs.IO, "can't open the workdir %s: %v; %s", wd, err, workdirHint)
}

// openNamedWorkdir opens a --workdir, following its path as the user typed it. With create, the
// missing part is made below the deepest folder that exists, one component at a time and never
// through a symlink that appears there meanwhile; what is opened is judged afterwards anyway.
func (l layout) openNamedWorkdir(create bool) (*os.File, error) {
	for tries := 0; ; tries++ {
		base, rest := l.workdir, []string(nil)
		for {
			if _, err := os.Stat(base); err == nil {
				break
			}
			parent := filepath.Dir(base)
			if parent == base {
				break
			}
			rest = append([]string{filepath.Base(base)}, rest...)
			base = parent
		}
		if rest == nil {
			f, err := os.OpenFile(l.workdir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
			switch {
			case err == nil:
				return f, nil
			case errors.Is(err, syscall.ENOTDIR):
				return nil, errs.New(errs.Denied, "the workdir %s is not a folder; pass --workdir with a folder", l.workdir)
			case errors.Is(err, fs.ErrNotExist) && tries < maxHops:
				continue // removed since it was found
			}
			return nil, errs.Wrap(err, errs.IO, "can't open the workdir %s: %v; %s", l.workdir, err, workdirHint)
		}
		if !create {
			return nil, nil
		}
		bd, err := os.OpenFile(base, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && tries < maxHops {
				continue
			}
			return nil, errs.Wrap(err, errs.IO, "can't create the workdir %s: %v; %s", l.workdir, err, workdirHint)
		}
		bt, err := newTree(bd, false, nil)
		if err != nil {
			return nil, errs.Wrap(err, errs.IO, "can't create the workdir %s: %v; %s", l.workdir, err, workdirHint)
		}
		d, _, escape, err := bt.openDir(strings.Join(rest, "/"), true)
		bt.close()
		switch {
		case err == nil:
			return d, nil
		case escape == nil && errors.Is(err, syscall.ENOENT) && tries < maxHops:
			continue
		}
		if escape == nil && !errors.Is(err, syscall.ENOTDIR) && !errors.Is(err, syscall.ELOOP) {
			return nil, errs.Wrap(err, errs.IO, "can't create the workdir %s: %v; %s", l.workdir, err, workdirHint)
		}
		return nil, walkError(base, strings.Join(rest, "/"), escape, err)
	}
}

// workdirHint is the way out of a workdir mur can't open or create: a read-only checkout has no
// room for workdir/, and the guest's folder need not live in the project at all.
const workdirHint = "pass --workdir with a folder you can write (the default is workdir/ beside murmur.yaml)"

// walkError explains why folder rel of the workdir could not be opened.
func walkError(workdir, rel string, escape *symlinkHop, err error) error {
	p := filepath.Join(workdir, filepath.FromSlash(rel))
	switch {
	case escape != nil:
		return errs.New(errs.Denied, "%s is a symlink to %s, which leads out of the workdir %s; mur mounts only folders inside the workdir, so it ran nothing. Replace the symlink with a real folder (its target is untouched)", filepath.Join(workdir, filepath.FromSlash(escape.path)), escape.target, workdir)
	case errors.Is(err, syscall.ENOTDIR):
		return errs.New(errs.Denied, "%s is not a folder, and filesystem.scope and read_only in murmur.yaml name folders; move it away or fix murmur.yaml", p)
	case errors.Is(err, syscall.ELOOP):
		return errs.New(errs.Denied, "%s goes through too many symlinks; replace them with real folders", p)
	}
	return errs.Wrap(err, errs.IO, "can't open %s: %v", p, err)
}

// open resolves the layout once more, creating what is missing, and returns the guest's root
// over the folders it checked and holds.
func (p *Plan) open() (*rootFS, error) {
	o, err := p.layout.resolve(true)
	if err != nil {
		return nil, err
	}
	root, subtrees, store := o.rootDir, o.roDirs, o.storeDir
	o.rootDir, o.roDirs, o.storeDir = nil, nil, nil
	fsys, err := newRootFS(root, false, subtrees, store)
	if err != nil {
		return nil, errs.Wrap(err, errs.IO, "can't mount %s: %v", o.root, err)
	}
	if fsys.state != nil {
		if fsys.state.quota, err = newQuota(fsys.state.dir, int64(p.StateMiB)<<20); err != nil {
			fsys.Close()
			return nil, errs.Wrap(err, errs.IO, "can't measure the state store: %v", err)
		}
	}
	return fsys, nil
}
