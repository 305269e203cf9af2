//go:build unix

package lockedfile

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"

	"github.com/murmur-nexus/mur/internal/errs"
)

type lockType int

const (
	exclusive lockType = unix.LOCK_EX
	shared    lockType = unix.LOCK_SH
)

const (
	lockOp   = "flock"
	noFollow = unix.O_NOFOLLOW
)

func openLockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|noFollow, 0o600)
	if isLinkRefusal(err) {
		target, _ := os.Readlink(path)
		return nil, errs.New(errs.Denied, "the lock file %s is a symlink to %s, and mur never locks through a link; remove the symlink (its target is untouched) and run again", path, target)
	}
	return f, err
}

func openLockFileIn(root *os.Root, name string) (*os.File, error) {
	f, err := root.OpenFile(name, os.O_RDWR|os.O_CREATE|noFollow, 0o600)
	if isLinkRefusal(err) {
		return nil, errs.New(errs.Denied, "the lock file %s in %s is a symlink, and mur never locks through a link; remove the symlink (its target is untouched) and run again", name, root.Name())
	}
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, notRegularIn(root, name)
	}
	return f, nil
}

// isLinkRefusal reports whether err is an O_NOFOLLOW open refusing a symlink.
func isLinkRefusal(err error) bool { return errors.Is(err, unix.ELOOP) }

func tryLock(f *os.File, how lockType) error {
	return unix.Flock(int(f.Fd()), int(how)|unix.LOCK_NB)
}

func unlock(f *os.File) { unix.Flock(int(f.Fd()), unix.LOCK_UN) }

func isBusy(err error) bool { return errors.Is(err, unix.EWOULDBLOCK) }

func isInterrupted(err error) bool { return errors.Is(err, unix.EINTR) }

func holdDirIn(root *os.Root, name string) (*os.File, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|unix.O_DIRECTORY|noFollow, 0)
	if err != nil {
		return nil, err
	}
	if err := tryLock(f, exclusive); err != nil {
		f.Close()
		return nil, &os.PathError{Op: lockOp, Path: name, Err: err}
	}
	return f, nil
}
