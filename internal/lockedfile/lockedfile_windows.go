package lockedfile

import (
	"errors"
	"io/fs"
	"os"

	"golang.org/x/sys/windows"

	"github.com/murmur-nexus/mur/internal/errs"
)

type lockType uint32

const (
	exclusive lockType = windows.LOCKFILE_EXCLUSIVE_LOCK
	shared    lockType = 0
)

const lockOp = "LockFileEx"

// noFollow opens a final symlink or junction itself instead of what it leads to. Windows has no
// flag that fails on one as O_NOFOLLOW does, so what was opened is looked at before it is used.
const noFollow = windows.FILE_FLAG_OPEN_REPARSE_POINT

// lockRange is the one byte every lock covers, just below the largest file offset. Windows locks
// are mandatory, so a locked byte can't be read through another handle; far past the end of any
// file mur writes, the lock stays advisory as flock is, and a lease or an ingest stays readable by
// the process that checks whether it is held. (cmd/go locks every byte, whose files are not read
// while locked.)
func lockRange() *windows.Overlapped {
	return &windows.Overlapped{Offset: 0xfffffffe, OffsetHigh: 0x7fffffff}
}

func openLockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|noFollow, 0o600)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	switch {
	case err != nil:
		f.Close()
		return nil, err
	case fi.Mode()&fs.ModeSymlink != 0:
		f.Close()
		target, _ := os.Readlink(path)
		return nil, errs.New(errs.Denied, "the lock file %s is a symlink to %s, and mur never locks through a link; remove the symlink (its target is untouched) and run again", path, target)
	case !fi.Mode().IsRegular():
		f.Close()
		return nil, errs.New(errs.Denied, "the lock file %s is not a regular file (a junction or another reparse point); move it away and run again", path)
	}
	return f, nil
}

func openLockFileIn(root *os.Root, name string) (*os.File, error) {
	f, err := root.OpenFile(name, os.O_RDWR|os.O_CREATE|noFollow, 0o600)
	if err != nil {
		if isLinkIn(root, name) {
			return nil, linkInError(root, name)
		}
		return nil, err
	}
	// os.Root resolves a link that stays inside it, so the file opened must also be the one the
	// name itself holds, not one a link there leads to.
	fi, err := f.Stat()
	named, nerr := root.Lstat(name)
	if err != nil || nerr != nil || !fi.Mode().IsRegular() || !os.SameFile(fi, named) {
		f.Close()
		if isLinkIn(root, name) {
			return nil, linkInError(root, name)
		}
		return nil, notRegularIn(root, name)
	}
	return f, nil
}

func isLinkIn(root *os.Root, name string) bool {
	fi, err := root.Lstat(name)
	return err == nil && fi.Mode()&fs.ModeSymlink != 0
}

func linkInError(root *os.Root, name string) error {
	return errs.New(errs.Denied, "the lock file %s in %s is a symlink, and mur never locks through a link; remove the symlink (its target is untouched) and run again", name, root.Name())
}

func tryLock(f *os.File, how lockType) error {
	err := windows.LockFileEx(windows.Handle(f.Fd()), uint32(how)|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, lockRange())
	if err != nil && !isBusy(err) {
		if fi, serr := f.Stat(); serr == nil && fi.IsDir() {
			// flock takes a folder, which mur uses to mark one in use; LockFileEx takes only files.
			return errs.New(errs.Denied, "mur can't lock the folder %s on Windows, where only files can be locked, so it can't mark the folder as in use; run mur on Linux or macOS (or under WSL) for this", f.Name())
		}
	}
	return err
}

func unlock(f *os.File) { windows.UnlockFileEx(windows.Handle(f.Fd()), 0, 1, 0, lockRange()) }

func isBusy(err error) bool { return errors.Is(err, windows.ERROR_LOCK_VIOLATION) }

func isInterrupted(error) bool { return false }

// holdDirIn refuses: LockFileEx takes only files, and a folder not marked as held would be taken
// for a dead process's leftover and removed from under the process using it.
func holdDirIn(root *os.Root, name string) (*os.File, error) {
	return nil, errs.New(errs.Denied, "mur can't hold the folder %s in %s on Windows, where only files can be locked, so another mur would take it for a dead process's leftover and remove it; run mur on Linux or macOS (WSL works)", name, root.Name())
}
