package sandbox

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/sys"
	"golang.org/x/sys/unix"
)

// rootFS is a WASI file system confined to one host folder.
//
// wazero's own DirFS joins guest paths onto the host folder and lets the kernel follow symlinks,
// so a symlink inside the folder leads anywhere (wazero issue 2321). rootFS goes through Go's
// os.Root instead, which resolves every path, symlinks included, without leaving the folder.
// On top of that it refuses to create symlinks and hard links (a guest-made link is either an
// escape or a way around a read-only subtree), and it refuses every write when read-only or
// when the target lies in one of its read-only subtrees.
type rootFS struct {
	experimentalsys.UnimplementedFS
	root     *os.Root
	readOnly bool
	// roSubtrees are slash paths relative to the root, with symlinks already resolved, that the
	// guest may read through this mount but never change.
	roSubtrees []string
}

// newRootFS opens hostDir as a confined file system. readOnlySubtrees name folders inside hostDir
// (host paths, or paths relative to hostDir) that stay read-only even though the mount itself is
// writable: mounting them again read-only at their own guest path is not enough, because a guest
// can always reach them through the writable parent's descriptor.
func newRootFS(hostDir string, readOnly bool, readOnlySubtrees ...string) (*rootFS, error) {
	realDir, err := filepath.EvalSymlinks(hostDir)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(realDir)
	if err != nil {
		return nil, err
	}
	r := &rootFS{root: root, readOnly: readOnly}
	for _, sub := range readOnlySubtrees {
		if !filepath.IsAbs(sub) {
			sub = filepath.Join(realDir, sub)
		}
		realSub, err := filepath.EvalSymlinks(sub)
		if err != nil {
			root.Close()
			return nil, err
		}
		rel, err := filepath.Rel(realDir, realSub)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			continue // outside this mount: nothing here can reach it
		}
		r.roSubtrees = append(r.roSubtrees, filepath.ToSlash(rel))
	}
	return r, nil
}

// Close releases the root folder's descriptor. Files already opened stay usable.
func (r *rootFS) Close() error { return r.root.Close() }

// String names the host folder, for wazero's debug output.
func (r *rootFS) String() string { return r.root.Name() }

// rootName maps wazero's name for the mount's own folder to os.Root's. A trailing slash is kept:
// os.Root honours it (it requires a folder), as POSIX does.
func rootName(p string) string {
	if p == "" || p == "/" {
		return "."
	}
	return p
}

// errno turns an os error into a WASI errno. os.Root reports a path that would leave the root
// with an error that has no errno of its own; the guest sees EPERM, as for any refused path.
func errno(err error) experimentalsys.Errno {
	if err == nil {
		return 0
	}
	var se syscall.Errno
	if errors.As(err, &se) {
		if se == syscall.EXDEV {
			return experimentalsys.EPERM
		}
		return experimentalsys.UnwrapOSError(err)
	}
	if strings.Contains(err.Error(), "escapes from parent") {
		return experimentalsys.EPERM
	}
	return experimentalsys.UnwrapOSError(err)
}

// resolve follows symlinks inside the root the way the kernel would, so that a path can be
// compared with the read-only subtrees: an existing symlink must not be a way into one. The last
// component is followed only when followLast is set (unlink and rename act on the link itself).
func (r *rootFS) resolve(p string, followLast bool) (string, experimentalsys.Errno) {
	todo := strings.Split(rootName(p), "/")
	var done []string
	hops := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(done) == 0 {
				return "", experimentalsys.EPERM
			}
			done = done[:len(done)-1]
			continue
		}
		cur := path.Join(append(append([]string{}, done...), c)...)
		if len(todo) == 0 && !followLast {
			done = append(done, c)
			break
		}
		fi, err := r.root.Lstat(cur)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			// Missing components can't be symlinks; os.Root reports the real error later.
			done = append(done, c)
			continue
		}
		if hops++; hops > 40 {
			return "", experimentalsys.ELOOP
		}
		target, err := r.root.Readlink(cur)
		if err != nil {
			return "", errno(err)
		}
		if path.IsAbs(target) {
			return "", experimentalsys.EPERM
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	return strings.Join(done, "/"), 0
}

// protected reports whether changing p (or, for a folder being moved, anything below it) would
// change a read-only subtree.
func (r *rootFS) protected(p string, followLast bool) experimentalsys.Errno {
	if r.readOnly {
		return experimentalsys.EROFS
	}
	if len(r.roSubtrees) == 0 {
		return 0
	}
	resolved, e := r.resolve(p, followLast)
	if e != 0 {
		return e
	}
	if r.inReadOnly(resolved) {
		return experimentalsys.EROFS
	}
	for _, ro := range r.roSubtrees {
		if resolved == "" || strings.HasPrefix(ro, resolved+"/") {
			return experimentalsys.EROFS // moving or removing an ancestor would move the subtree
		}
	}
	return 0
}

func (r *rootFS) inReadOnly(resolved string) bool {
	for _, ro := range r.roSubtrees {
		if ro == "." || resolved == ro || strings.HasPrefix(resolved, ro+"/") {
			return true
		}
	}
	return false
}

// OpenFile implements experimentalsys.FS.
func (r *rootFS) OpenFile(p string, flag experimentalsys.Oflag, perm fs.FileMode) (experimentalsys.File, experimentalsys.Errno) {
	writes := flag&(experimentalsys.O_WRONLY|experimentalsys.O_RDWR) != 0 || flag&(experimentalsys.O_CREAT|experimentalsys.O_TRUNC) != 0
	ro := r.readOnly
	if !ro && len(r.roSubtrees) > 0 {
		resolved, e := r.resolve(p, flag&experimentalsys.O_NOFOLLOW == 0)
		if e != 0 {
			return nil, e
		}
		ro = r.inReadOnly(resolved)
	}
	if ro && writes {
		return nil, experimentalsys.EROFS
	}
	var osFlag int
	switch {
	case flag&experimentalsys.O_RDWR != 0:
		osFlag = os.O_RDWR
	case flag&experimentalsys.O_WRONLY != 0:
		osFlag = os.O_WRONLY
	default:
		osFlag = os.O_RDONLY
	}
	for _, m := range []struct {
		wasi experimentalsys.Oflag
		os   int
	}{
		{experimentalsys.O_APPEND, os.O_APPEND},
		{experimentalsys.O_CREAT, os.O_CREATE},
		{experimentalsys.O_EXCL, os.O_EXCL},
		{experimentalsys.O_TRUNC, os.O_TRUNC},
		{experimentalsys.O_SYNC, os.O_SYNC},
		{experimentalsys.O_DIRECTORY, syscall.O_DIRECTORY},
		{experimentalsys.O_NOFOLLOW, syscall.O_NOFOLLOW},
	} {
		if flag&m.wasi != 0 {
			osFlag |= m.os
		}
	}
	if flag&experimentalsys.O_DIRECTORY != 0 && osFlag&(os.O_WRONLY|os.O_RDWR) != 0 {
		return nil, experimentalsys.EISDIR
	}
	f, err := r.root.OpenFile(rootName(p), osFlag, perm)
	if err != nil {
		e := errno(err)
		if e == experimentalsys.ENOTDIR && flag&experimentalsys.O_DIRECTORY == 0 {
			e = experimentalsys.ENOENT
		}
		return nil, e
	}
	return &rootFile{file: f, append: flag&experimentalsys.O_APPEND != 0, readOnly: ro}, 0
}

// Lstat implements experimentalsys.FS.
func (r *rootFS) Lstat(p string) (sys.Stat_t, experimentalsys.Errno) {
	fi, err := r.root.Lstat(rootName(p))
	if err != nil {
		return sys.Stat_t{}, errno(err)
	}
	return sys.NewStat_t(fi), 0
}

// Stat implements experimentalsys.FS.
func (r *rootFS) Stat(p string) (sys.Stat_t, experimentalsys.Errno) {
	fi, err := r.root.Stat(rootName(p))
	if err != nil {
		return sys.Stat_t{}, errno(err)
	}
	return sys.NewStat_t(fi), 0
}

// Mkdir implements experimentalsys.FS.
func (r *rootFS) Mkdir(p string, perm fs.FileMode) experimentalsys.Errno {
	if e := r.protected(p, false); e != 0 {
		return e
	}
	e := errno(r.root.Mkdir(rootName(p), perm))
	if e == experimentalsys.ENOTDIR {
		e = experimentalsys.ENOENT
	}
	return e
}

// Chmod implements experimentalsys.FS.
func (r *rootFS) Chmod(p string, perm fs.FileMode) experimentalsys.Errno {
	if e := r.protected(p, true); e != 0 {
		return e
	}
	return errno(r.root.Chmod(rootName(p), perm))
}

// Rename implements experimentalsys.FS. Both names are inside this root; wazero itself refuses
// a rename between two mounts.
func (r *rootFS) Rename(from, to string) experimentalsys.Errno {
	if e := r.protected(from, false); e != 0 {
		return e
	}
	if e := r.protected(to, false); e != 0 {
		return e
	}
	return errno(r.root.Rename(rootName(from), rootName(to)))
}

// Rmdir implements experimentalsys.FS.
func (r *rootFS) Rmdir(p string) experimentalsys.Errno {
	if e := r.protected(p, false); e != 0 {
		return e
	}
	fi, err := r.root.Lstat(rootName(p))
	if err != nil {
		return errno(err)
	}
	if !fi.IsDir() {
		return experimentalsys.ENOTDIR
	}
	return errno(r.root.Remove(rootName(p)))
}

// Unlink implements experimentalsys.FS.
func (r *rootFS) Unlink(p string) experimentalsys.Errno {
	if e := r.protected(p, false); e != 0 {
		return e
	}
	fi, err := r.root.Lstat(rootName(p))
	if err != nil {
		return errno(err)
	}
	if fi.IsDir() {
		return experimentalsys.EISDIR
	}
	return errno(r.root.Remove(rootName(p)))
}

// Link implements experimentalsys.FS and always refuses: a hard link to a file the guest can
// read but not write would hand it a writable name for that file.
func (r *rootFS) Link(string, string) experimentalsys.Errno { return experimentalsys.EPERM }

// Symlink implements experimentalsys.FS and always refuses: a guest-made symlink is the classic
// way out of a directory sandbox, and nothing a capsule needs depends on making one.
func (r *rootFS) Symlink(string, string) experimentalsys.Errno { return experimentalsys.EPERM }

// Readlink implements experimentalsys.FS. Reading a link's text is harmless: following it is
// what os.Root confines.
func (r *rootFS) Readlink(p string) (string, experimentalsys.Errno) {
	s, err := r.root.Readlink(rootName(p))
	if err != nil {
		return "", errno(err)
	}
	return filepath.ToSlash(s), 0
}

// Utimens implements experimentalsys.FS.
func (r *rootFS) Utimens(p string, atim, mtim int64) experimentalsys.Errno {
	if e := r.protected(p, true); e != 0 {
		return e
	}
	return errno(r.root.Chtimes(rootName(p), wasiTime(atim), wasiTime(mtim)))
}

// wasiTime maps UTIME_OMIT to the zero time, which os.Chtimes leaves unchanged.
func wasiTime(ns int64) time.Time {
	if ns == experimentalsys.UTIME_OMIT {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// rootFile is an open file of a rootFS.
type rootFile = osFile[int64]

// osFile is generic only over its offset type: WASI's Seek returns an Errno where io.Seeker
// returns an error, and vet's stdmethods check flags any Seek(int64, int) that differs from
// io.Seeker. Declaring the offset as a type parameter keeps that check quiet without a vet flag.
type osFile[Off ~int64] struct {
	experimentalsys.UnimplementedFile
	file     *os.File
	append   bool
	readOnly bool
	closed   bool
	statDone bool
	dev      uint64
	ino      sys.Inode
	isDir    bool
}

func (f *osFile[Off]) cached() experimentalsys.Errno {
	if f.statDone {
		return 0
	}
	_, e := f.Stat()
	return e
}

func (f *osFile[Off]) Dev() (uint64, experimentalsys.Errno) {
	e := f.cached()
	return f.dev, e
}

func (f *osFile[Off]) Ino() (sys.Inode, experimentalsys.Errno) {
	e := f.cached()
	return f.ino, e
}

func (f *osFile[Off]) IsDir() (bool, experimentalsys.Errno) {
	e := f.cached()
	return f.isDir, e
}

func (f *osFile[Off]) IsAppend() bool { return f.append }

func (f *osFile[Off]) SetAppend(enable bool) experimentalsys.Errno {
	if f.closed {
		return experimentalsys.EBADF
	}
	if enable && f.readOnly {
		return experimentalsys.EROFS
	}
	rc, err := f.file.SyscallConn()
	if err != nil {
		return errno(err)
	}
	var opErr error
	err = rc.Control(func(fd uintptr) {
		fl, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
		if err != nil {
			opErr = err
			return
		}
		if enable {
			fl |= unix.O_APPEND
		} else {
			fl &^= unix.O_APPEND
		}
		_, opErr = unix.FcntlInt(fd, unix.F_SETFL, fl)
	})
	if err == nil {
		err = opErr
	}
	if err != nil {
		return errno(err)
	}
	f.append = enable
	return 0
}

func (f *osFile[Off]) Stat() (sys.Stat_t, experimentalsys.Errno) {
	if f.closed {
		return sys.Stat_t{}, experimentalsys.EBADF
	}
	fi, err := f.file.Stat()
	if err != nil {
		return sys.Stat_t{}, errno(err)
	}
	st := sys.NewStat_t(fi)
	f.dev, f.ino, f.isDir, f.statDone = st.Dev, st.Ino, fi.IsDir(), true
	return st, 0
}

func (f *osFile[Off]) Read(buf []byte) (int, experimentalsys.Errno) {
	if len(buf) == 0 {
		return 0, 0
	}
	n, err := f.file.Read(buf)
	if err == io.EOF {
		err = nil
	}
	return n, f.fileErrno(err)
}

func (f *osFile[Off]) Pread(buf []byte, off int64) (int, experimentalsys.Errno) {
	if len(buf) == 0 {
		return 0, 0
	}
	n, err := f.file.ReadAt(buf, off)
	if err == io.EOF {
		err = nil
	}
	return n, f.fileErrno(err)
}

func (f *osFile[Off]) Seek(offset Off, whence int) (int64, experimentalsys.Errno) {
	n, err := f.file.Seek(int64(offset), whence)
	return n, f.fileErrno(err)
}

func (f *osFile[Off]) Readdir(n int) ([]experimentalsys.Dirent, experimentalsys.Errno) {
	if f.closed {
		return nil, experimentalsys.EBADF
	}
	fis, err := f.file.Readdir(n)
	if err == io.EOF {
		err = nil
	}
	if err != nil {
		return nil, f.fileErrno(err)
	}
	out := make([]experimentalsys.Dirent, 0, len(fis))
	for _, fi := range fis {
		out = append(out, experimentalsys.Dirent{Name: fi.Name(), Ino: sys.NewStat_t(fi).Ino, Type: fi.Mode().Type()})
	}
	return out, 0
}

func (f *osFile[Off]) Write(buf []byte) (int, experimentalsys.Errno) {
	if len(buf) == 0 {
		return 0, 0
	}
	n, err := f.file.Write(buf)
	return n, f.fileErrno(err)
}

func (f *osFile[Off]) Pwrite(buf []byte, off int64) (int, experimentalsys.Errno) {
	if len(buf) == 0 {
		return 0, 0
	}
	n, err := f.file.WriteAt(buf, off)
	return n, f.fileErrno(err)
}

func (f *osFile[Off]) Truncate(size int64) experimentalsys.Errno {
	if size < 0 {
		return experimentalsys.EINVAL
	}
	if f.readOnly {
		return experimentalsys.EROFS
	}
	return f.fileErrno(f.file.Truncate(size))
}

func (f *osFile[Off]) Sync() experimentalsys.Errno { return f.fileErrno(f.file.Sync()) }

func (f *osFile[Off]) Datasync() experimentalsys.Errno { return f.fileErrno(f.file.Sync()) }

// Utimens sets times through the descriptor. A file opened for reading inside a read-only
// subtree must not have them changed either.
func (f *osFile[Off]) Utimens(atim, mtim int64) experimentalsys.Errno {
	if f.closed {
		return experimentalsys.EBADF
	}
	if f.readOnly {
		return experimentalsys.EROFS
	}
	if atim == experimentalsys.UTIME_OMIT && mtim == experimentalsys.UTIME_OMIT {
		return 0
	}
	if atim == experimentalsys.UTIME_OMIT || mtim == experimentalsys.UTIME_OMIT {
		st, e := f.Stat()
		if e != 0 {
			return e
		}
		if atim == experimentalsys.UTIME_OMIT {
			atim = st.Atim
		}
		if mtim == experimentalsys.UTIME_OMIT {
			mtim = st.Mtim
		}
	}
	rc, err := f.file.SyscallConn()
	if err != nil {
		return errno(err)
	}
	var opErr error
	err = rc.Control(func(fd uintptr) {
		tv := []unix.Timeval{unix.NsecToTimeval(atim), unix.NsecToTimeval(mtim)}
		opErr = unix.Futimes(int(fd), tv)
	})
	if err == nil {
		err = opErr
	}
	return errno(err)
}

func (f *osFile[Off]) Close() experimentalsys.Errno {
	if f.closed {
		return 0
	}
	f.closed = true
	return errno(f.file.Close())
}

func (f *osFile[Off]) fileErrno(err error) experimentalsys.Errno {
	if err == nil {
		return 0
	}
	if f.closed || errors.Is(err, os.ErrClosed) {
		return experimentalsys.EBADF
	}
	return errno(err)
}
