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
// (O_NOFOLLOW; on Windows the link itself is opened and refused), and a FIFO is opened without
// blocking (O_NONBLOCK) and then refused, so that a planted FIFO can't hang the caller. Symlinks
// in the folders above path are followed: callers hold those folders themselves.
func Open(path string, flag int, perm os.FileMode) (*os.File, error) {
	return open(path, flag, perm, true, false)
}

// OpenRead opens path for reading as Open does, but takes a regular file with several links:
// reading one changes nothing anywhere else.
func OpenRead(path string) (*os.File, error) {
	return open(path, os.O_RDONLY, 0, false, false)
}

// OpenNamed opens for reading a file the user named, on the command line say: a final symlink
// is followed, since the user chose the name, but as everywhere here the open never blocks on a
// FIFO, and anything but a regular file (a FIFO, a device such as /dev/zero, a folder, a socket)
// is refused with a *NotRegularError.
func OpenNamed(path string) (*os.File, error) {
	return open(path, os.O_RDONLY, 0, false, true)
}

// ReadNamed reads the file the user named at path (see OpenNamed), refusing one of more than
// max bytes as ReadFile does.
func ReadNamed(path string, max int64) ([]byte, error) {
	f, err := OpenNamed(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAtMost(f, path, max)
}

// ReadFile reads the regular file at path (see Open), refusing one of more than max bytes with
// an error that wraps ErrTooLarge. It reads at most max+1 bytes, whatever the file claims, so a
// file that grows while it is read can't exhaust memory either. A file with several links is
// read: it is a plain file of the user's own file system, and nothing here writes to it.
func ReadFile(path string, max int64) ([]byte, error) {
	f, err := open(path, os.O_RDONLY, 0, false, false)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAtMost(f, path, max)
}

// readAtMost reads f, opened from path, to its end, refusing more than max bytes.
func readAtMost(f *os.File, path string, max int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%s is over %d bytes: %w", path, max, ErrTooLarge)
	}
	return data, nil
}
