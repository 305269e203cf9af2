//go:build unix

package sandbox

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/sys"
	"golang.org/x/sys/unix"

	"github.com/murmur-nexus/mur/state"
)

// rootFS is the guest's one file system, preopened at "/".
//
// It is made of folders the plan opened and checked once, and it holds them open: no host path
// is ever looked up again. Every guest path is walked one component at a time from a held
// folder, with O_NOFOLLOW; rootFS expands symlinks itself, only while they stay inside their
// tree, and each operation acts relative to the folder the walk holds at its end. So what is
// checked is what is used: the read-only decision is made on the folders really walked through,
// and a name that another guest swaps for a symlink between two steps is either walked (and
// judged) like any symlink or refused, never followed by the kernel behind mur's back.
// (wazero's own DirFS lets the kernel follow symlinks, so a symlink in the folder leads
// anywhere: wazero issue 2321.)
//
// rootFS also routes: a first component named state (state.GuestDir) leads into the state store
// when one is granted. It matches whole components, never string prefixes, so "stateful.txt",
// "stateX.txt" and "state-notes" stay in the workdir. With one preopen, Go guests (which pick
// among several preopens by string prefix) and wasi-libc guests send the same cleaned path, so
// both reach the store by writing state/<file>.
//
// It refuses to create symlinks and hard links (a guest-made link is either an escape or a way
// around a read-only subtree), every change inside a read-only tree or subtree, and every move
// or removal of a read-only subtree or of a folder that holds one.
type rootFS struct {
	experimentalsys.UnimplementedFS
	work  *tree
	state *tree // nil when no state store is granted
}

// newRootFS takes ownership of root (the scope root), the read-only subtrees and store (nil when
// no state store is granted); see newTree for how the subtrees are judged.
func newRootFS(root *os.File, readOnly bool, subtrees []*os.File, store *os.File) (*rootFS, error) {
	work, err := newTree(root, readOnly, subtrees)
	if err != nil {
		if store != nil {
			store.Close()
		}
		return nil, err
	}
	r := &rootFS{work: work}
	if store != nil {
		if r.state, err = newTree(store, false, nil); err != nil {
			work.close()
			return nil, err
		}
	}
	return r, nil
}

// Close releases the held folders. Files the guest opened stay usable until it closes them.
func (r *rootFS) Close() error {
	r.work.close()
	if r.state != nil {
		r.state.close()
	}
	return nil
}

// String names the host folder, for wazero's debug output.
func (r *rootFS) String() string { return r.work.dir.Name() }

// route picks the tree guest path p lives in and the path inside it. wazero hands over cleaned
// paths ("state/x"), or a folder's name joined to one ("/x", "state/."), and keeps a trailing
// slash, which asks for a folder (dirOnly). storeRoot is p naming the state store's own folder,
// which, like a mount point, can't be moved or removed.
func (r *rootFS) route(p string) (t *tree, rel string, dirOnly, storeRoot bool) {
	dirOnly = strings.HasSuffix(p, "/") && strings.Trim(p, "/") != ""
	p = strings.TrimPrefix(path.Clean("/"+p), "/")
	if r.state != nil {
		if first, rest, _ := strings.Cut(p, "/"); first == state.GuestDir {
			return r.state, rest, dirOnly, rest == ""
		}
	}
	return r.work, p, dirOnly, false
}

// OpenFile implements experimentalsys.FS.
func (r *rootFS) OpenFile(p string, flag experimentalsys.Oflag, perm fs.FileMode) (experimentalsys.File, experimentalsys.Errno) {
	t, rel, dirOnly, _ := r.route(p)
	if t.quota == nil || flag&experimentalsys.O_TRUNC == 0 {
		return t.open(rel, dirOnly, flag, perm)
	}
	freed := t.freedBy(rel)
	f, e := t.open(rel, dirOnly, flag, perm)
	if e == 0 {
		t.quota.shrink(freed)
	}
	return f, e
}

// Lstat implements experimentalsys.FS.
func (r *rootFS) Lstat(p string) (sys.Stat_t, experimentalsys.Errno) {
	t, rel, dirOnly, _ := r.route(p)
	if dirOnly {
		return t.stat(rel, true)
	}
	return t.lstat(rel)
}

// Stat implements experimentalsys.FS.
func (r *rootFS) Stat(p string) (sys.Stat_t, experimentalsys.Errno) {
	t, rel, dirOnly, _ := r.route(p)
	return t.stat(rel, dirOnly)
}

// Mkdir implements experimentalsys.FS.
func (r *rootFS) Mkdir(p string, perm fs.FileMode) experimentalsys.Errno {
	t, rel, _, _ := r.route(p)
	return t.mkdir(rel, perm)
}

// Chmod implements experimentalsys.FS. The store's own folder stays 0700.
func (r *rootFS) Chmod(p string, perm fs.FileMode) experimentalsys.Errno {
	t, rel, _, storeRoot := r.route(p)
	if storeRoot {
		return experimentalsys.EPERM
	}
	return t.chmod(rel, perm)
}

// Rename implements experimentalsys.FS. A rename between the workdir and the state store is
// refused with ENOSYS, as wazero refuses one between two preopens.
func (r *rootFS) Rename(from, to string) experimentalsys.Errno {
	tf, relFrom, _, storeFrom := r.route(from)
	tt, relTo, _, storeTo := r.route(to)
	switch {
	case storeFrom || storeTo:
		return experimentalsys.EPERM
	case tf != tt:
		return experimentalsys.ENOSYS
	}
	freed := tf.freedBy(relTo)
	e := tf.rename(relFrom, relTo)
	if e == 0 && relFrom != relTo {
		tf.quota.shrink(freed)
	}
	return e
}

// Rmdir implements experimentalsys.FS.
func (r *rootFS) Rmdir(p string) experimentalsys.Errno {
	t, rel, _, storeRoot := r.route(p)
	if storeRoot {
		return experimentalsys.EPERM
	}
	return t.rmdir(rel)
}

// Unlink implements experimentalsys.FS.
func (r *rootFS) Unlink(p string) experimentalsys.Errno {
	t, rel, _, _ := r.route(p)
	freed := t.freedBy(rel)
	e := t.unlink(rel)
	if e == 0 {
		t.quota.shrink(freed)
	}
	return e
}

// Link implements experimentalsys.FS and always refuses: a hard link to a file the guest can
// read but not write would hand it a writable name for that file.
func (r *rootFS) Link(string, string) experimentalsys.Errno { return experimentalsys.EPERM }

// Symlink implements experimentalsys.FS and always refuses: a guest-made symlink is the classic
// way out of a directory sandbox, and nothing a capsule needs depends on making one.
func (r *rootFS) Symlink(string, string) experimentalsys.Errno { return experimentalsys.EPERM }

// Readlink implements experimentalsys.FS. Reading a link's text is harmless: following it is
// what rootFS confines.
func (r *rootFS) Readlink(p string) (string, experimentalsys.Errno) {
	t, rel, _, _ := r.route(p)
	return t.readlink(rel)
}

// Utimens implements experimentalsys.FS.
func (r *rootFS) Utimens(p string, atim, mtim int64) experimentalsys.Errno {
	t, rel, _, _ := r.route(p)
	return t.utimens(rel, atim, mtim)
}

var openFlags = []struct {
	wasi experimentalsys.Oflag
	os   int
}{
	{experimentalsys.O_APPEND, unix.O_APPEND},
	{experimentalsys.O_CREAT, unix.O_CREAT},
	{experimentalsys.O_EXCL, unix.O_EXCL},
	{experimentalsys.O_TRUNC, unix.O_TRUNC},
	{experimentalsys.O_SYNC, unix.O_SYNC},
	{experimentalsys.O_DIRECTORY, unix.O_DIRECTORY},
}

func (t *tree) open(rel string, dirOnly bool, flag experimentalsys.Oflag, perm fs.FileMode) (experimentalsys.File, experimentalsys.Errno) {
	writes := flag&(experimentalsys.O_WRONLY|experimentalsys.O_RDWR) != 0 || flag&(experimentalsys.O_CREAT|experimentalsys.O_TRUNC) != 0
	var osFlag int
	switch {
	case flag&experimentalsys.O_RDWR != 0:
		osFlag = unix.O_RDWR
	case flag&experimentalsys.O_WRONLY != 0:
		osFlag = unix.O_WRONLY
	default:
		osFlag = unix.O_RDONLY
	}
	for _, m := range openFlags {
		if flag&m.wasi != 0 {
			osFlag |= m.os
		}
	}
	if dirOnly {
		osFlag |= unix.O_DIRECTORY
	}
	if osFlag&unix.O_DIRECTORY != 0 && writes {
		return nil, experimentalsys.EISDIR
	}
	// The kernel never follows the last component: a symlink there is expanded below, so that
	// it is judged like any other step.
	osFlag |= unix.O_NOFOLLOW | unix.O_CLOEXEC
	follow := flag&experimentalsys.O_NOFOLLOW == 0
	notFound := func(e experimentalsys.Errno) experimentalsys.Errno {
		if e == experimentalsys.ENOTDIR && flag&experimentalsys.O_DIRECTORY == 0 {
			return experimentalsys.ENOENT
		}
		return e
	}

	c, last, e := t.at(rel)
	if e != 0 {
		return nil, notFound(e)
	}
	defer c.close()
	for {
		ro := c.readOnly()
		if ro && writes {
			return nil, experimentalsys.EROFS
		}
		fd, err := unix.Openat(c.dir(), last, osFlag, uint32(perm.Perm()))
		if err == nil {
			if !ro && len(t.roRoots) > 0 {
				// A read-only subtree's own folder, opened for reading.
				if id, err := fdID(fd); err == nil && t.roRoots[id] {
					ro = true
				}
			}
			return &rootFile{file: os.NewFile(uintptr(fd), rel), append: flag&experimentalsys.O_APPEND != 0, readOnly: ro, quota: t.quota}, 0
		}
		maybeLink := err == unix.ELOOP || err == unix.ENOTDIR && osFlag&unix.O_DIRECTORY != 0
		if !follow || !maybeLink {
			return nil, notFound(errno(err))
		}
		target, isLink, e := readlinkAt(c.dir(), last)
		switch {
		case e != 0:
			return nil, e
		case isLink:
			if last, e = c.follow(last, target); e != 0 {
				return nil, notFound(e)
			}
		case replaced(c.dir(), last, err):
			// It was a symlink a moment ago: look again, within the bound.
			if c.hops++; c.hops > maxHops {
				return nil, experimentalsys.ELOOP
			}
		default:
			return nil, notFound(errno(err))
		}
	}
}

func (t *tree) lstat(rel string) (sys.Stat_t, experimentalsys.Errno) {
	c, last, e := t.at(rel)
	if e != 0 {
		return sys.Stat_t{}, e
	}
	defer c.close()
	var st unix.Stat_t
	if err := unix.Fstatat(c.dir(), last, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return sys.Stat_t{}, errno(err)
	}
	return statOf(&st), 0
}

func (t *tree) mkdir(rel string, perm fs.FileMode) experimentalsys.Errno {
	c, last, e := t.at(rel)
	if e == 0 {
		defer c.close()
		switch {
		case last == ".":
			e = experimentalsys.EEXIST
		case c.readOnly():
			e = experimentalsys.EROFS
		default:
			e = errno(unix.Mkdirat(c.dir(), last, uint32(perm.Perm())))
		}
	}
	if e == experimentalsys.ENOTDIR {
		e = experimentalsys.ENOENT
	}
	return e
}

func (t *tree) rename(from, to string) experimentalsys.Errno {
	cf, lf, e := t.at(from)
	if e != 0 {
		return e
	}
	defer cf.close()
	ct, lt, e := t.at(to)
	if e != 0 {
		return e
	}
	defer ct.close()
	if cf.readOnly() || ct.readOnly() {
		return experimentalsys.EROFS
	}
	if e := cf.pinnedAt(lf); e != 0 {
		return e
	}
	if e := ct.pinnedAt(lt); e != 0 {
		return e
	}
	return errno(unix.Renameat(cf.dir(), lf, ct.dir(), lt))
}

func (t *tree) rmdir(rel string) experimentalsys.Errno {
	c, last, e := t.at(rel)
	if e != 0 {
		return e
	}
	defer c.close()
	if c.readOnly() {
		return experimentalsys.EROFS
	}
	if e := c.pinnedAt(last); e != 0 {
		return e
	}
	var st unix.Stat_t
	if err := unix.Fstatat(c.dir(), last, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return errno(err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return experimentalsys.ENOTDIR
	}
	return errno(unix.Unlinkat(c.dir(), last, unix.AT_REMOVEDIR))
}

func (t *tree) unlink(rel string) experimentalsys.Errno {
	c, last, e := t.at(rel)
	if e != 0 {
		return e
	}
	defer c.close()
	if c.readOnly() {
		return experimentalsys.EROFS
	}
	return errno(unix.Unlinkat(c.dir(), last, 0))
}

func (t *tree) readlink(rel string) (string, experimentalsys.Errno) {
	c, last, e := t.at(rel)
	if e != 0 {
		return "", e
	}
	defer c.close()
	target, isLink, e := readlinkAt(c.dir(), last)
	switch {
	case e != 0:
		return "", e
	case !isLink:
		var st unix.Stat_t
		if err := unix.Fstatat(c.dir(), last, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return "", errno(err)
		}
		return "", experimentalsys.EINVAL
	}
	return target, 0
}

// statOf is a stat result as wazero wants it, with Go's file mode bits.
func statOf(st *unix.Stat_t) sys.Stat_t {
	mode := fs.FileMode(st.Mode & 0o777)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		mode |= fs.ModeSocket
	case unix.S_IFBLK:
		mode |= fs.ModeDevice
	case unix.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	}
	if st.Mode&unix.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if st.Mode&unix.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if st.Mode&unix.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return sys.Stat_t{
		Dev: uint64(st.Dev), Ino: st.Ino, Mode: mode, Nlink: uint64(st.Nlink), Size: st.Size,
		Atim: st.Atim.Nano(), Mtim: st.Mtim.Nano(), Ctim: st.Ctim.Nano(),
	}
}

// errno turns an error into a WASI errno. A path that would leave the root is EPERM, as for
// any refused path.
func errno(err error) experimentalsys.Errno {
	if err == nil {
		return 0
	}
	var se syscall.Errno
	if errors.As(err, &se) && se == syscall.EXDEV {
		return experimentalsys.EPERM
	}
	return experimentalsys.UnwrapOSError(err)
}
