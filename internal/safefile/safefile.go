// Package safefile opens files that someone else may have planted: a project cloned from a
// stranger, or a folder of the Murmur home that another local user or process can write. Such a
// name may be a symlink to a secret or to /dev/zero, a FIFO that blocks whoever opens it, a
// folder, or a hard link to a file outside. Every open here refuses to follow a final symlink,
// never blocks on a FIFO, and hands back only a regular file: with one link for Open, whose
// caller may write through it, with any number for OpenRead and ReadFile, since reading one
// changes nothing elsewhere.
package safefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// ErrNotRegular is wrapped by every refusal of a name that is not a plain file: a symlink, a
// FIFO, a socket, a device, a folder, or a file with more than one link.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is wrapped by ReadFile's refusal of a file over its cap.
var ErrTooLarge = errors.New("file too large")

// NotRegularError says what was found at a name instead of a regular file.
type NotRegularError struct {
	Path  string
	Found string // "a symlink", "a FIFO", "a folder", "a file with 2 links", ...
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s is %s, not a regular file", e.Path, e.Found)
}

func (e *NotRegularError) Unwrap() error { return ErrNotRegular }

// Open opens path with flag (os.O_RDONLY, os.O_RDWR|os.O_CREATE, ...) and perm, refusing with a
// *NotRegularError anything but a regular file with one link. A final symlink is never followed
// (O_NOFOLLOW), and a FIFO is opened without blocking (O_NONBLOCK) and then refused, so that a
// planted FIFO can't hang the caller. Symlinks in the folders above path are followed: callers
// hold those folders themselves.
func Open(path string, flag int, perm os.FileMode) (*os.File, error) {
	return open(path, flag, perm, true)
}

// OpenRead opens path for reading as Open does, but takes a regular file with several links:
// reading one changes nothing anywhere else.
func OpenRead(path string) (*os.File, error) {
	return open(path, os.O_RDONLY, 0, false)
}

func open(path string, flag int, perm os.FileMode, oneLink bool) (*os.File, error) {
	fd, err := unix.Open(path, flag|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, uint32(perm.Perm()))
	for errors.Is(err, unix.EINTR) {
		fd, err = unix.Open(path, flag|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, uint32(perm.Perm()))
	}
	if err != nil {
		switch {
		case errors.Is(err, unix.ELOOP):
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

// ReadFile reads the regular file at path (see Open), refusing one of more than max bytes with
// an error that wraps ErrTooLarge. It reads at most max+1 bytes, whatever the file claims, so a
// file that grows while it is read can't exhaust memory either. A file with several links is
// read: it is a plain file of the user's own file system, and nothing here writes to it.
func ReadFile(path string, max int64) ([]byte, error) {
	f, err := open(path, os.O_RDONLY, 0, false)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%s is over %d bytes: %w", path, max, ErrTooLarge)
	}
	return data, nil
}
