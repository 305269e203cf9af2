//go:build unix

package safefile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// NoFollow is the open flag that keeps a final symlink from being followed: the open fails on
// one (ELOOP), and with O_CREATE no file is made where it points.
const NoFollow = unix.O_NOFOLLOW

// open opens path, never blocking, and hands back only a regular file (with one link, when
// oneLink). A final symlink is refused unless follow.
func open(path string, flag int, perm os.FileMode, oneLink, follow bool) (*os.File, error) {
	flag |= unix.O_NONBLOCK | unix.O_CLOEXEC
	if !follow {
		flag |= unix.O_NOFOLLOW
	}
	fd, err := unix.Open(path, flag, uint32(perm.Perm()))
	for errors.Is(err, unix.EINTR) {
		fd, err = unix.Open(path, flag, uint32(perm.Perm()))
	}
	if err != nil {
		switch {
		case errors.Is(err, unix.ELOOP) && !follow:
			return nil, &NotRegularError{Path: path, Found: "a symlink"}
		case errors.Is(err, unix.EISDIR):
			return nil, &NotRegularError{Path: path, Found: "a folder"}
		case errors.Is(err, unix.ENXIO):
			// A FIFO opened for writing with no reader, or a socket.
			return nil, &NotRegularError{Path: path, Found: "a FIFO or socket"}
		}
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &fs.PathError{Op: "fstat", Path: path, Err: err}
	}
	if found := kind(&st, oneLink); found != "" {
		unix.Close(fd)
		return nil, &NotRegularError{Path: path, Found: found}
	}
	// Regular files ignore O_NONBLOCK, but clear it so the handle behaves as any other.
	if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err == nil {
		unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl&^unix.O_NONBLOCK)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// kind names what st is when it is not a regular file with one link, and is "" when it is.
func kind(st *unix.Stat_t, oneLink bool) string {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		if oneLink && st.Nlink > 1 {
			return fmt.Sprintf("a file with %d links", st.Nlink)
		}
		return ""
	case unix.S_IFDIR:
		return "a folder"
	case unix.S_IFIFO:
		return "a FIFO"
	case unix.S_IFSOCK:
		return "a socket"
	case unix.S_IFCHR, unix.S_IFBLK:
		return "a device"
	case unix.S_IFLNK:
		return "a symlink"
	}
	return "not a regular file"
}
