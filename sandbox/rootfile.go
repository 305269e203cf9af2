//go:build unix

package sandbox

import (
	"errors"
	"io"
	"os"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/sys"
	"golang.org/x/sys/unix"
)

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
	quota    *quota // the state store's, for a file in it; nil elsewhere
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
	charged, e := f.charge(len(buf), -1)
	if e != 0 {
		return 0, e
	}
	n, err := f.file.Write(buf)
	f.refund(charged, len(buf), n)
	return n, f.fileErrno(err)
}

func (f *osFile[Off]) Pwrite(buf []byte, off int64) (int, experimentalsys.Errno) {
	if len(buf) == 0 {
		return 0, 0
	}
	charged, e := f.charge(len(buf), off)
	if e != 0 {
		return 0, e
	}
	n, err := f.file.WriteAt(buf, off)
	f.refund(charged, len(buf), n)
	return n, f.fileErrno(err)
}

func (f *osFile[Off]) Truncate(size int64) experimentalsys.Errno {
	if size < 0 {
		return experimentalsys.EINVAL
	}
	if f.readOnly {
		return experimentalsys.EROFS
	}
	if f.quota != nil {
		fi, err := f.file.Stat()
		if err != nil {
			return errno(err)
		}
		if !f.quota.grow(size - fi.Size()) {
			return errQuota
		}
		if err := f.file.Truncate(size); err != nil {
			f.quota.shrink(size - fi.Size())
			return f.fileErrno(err)
		}
		f.quota.shrink(fi.Size() - size)
		return 0
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
