//go:build unix

package state

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"

	"github.com/murmur-nexus/mur/internal/errs"
)

// openCheckedHook, when set by a test, runs between Open's path checks and its first use of a
// descriptor: the moment a racing writer would swap the store for a symlink.
var openCheckedHook func()

// Open is Ensure done through descriptors, with the store held: the state folder is opened
// without following a symlink, the store made and opened relative to it, and each tightened to
// 0700 through its descriptor, so a store or state folder swapped for a symlink after the checks
// is refused and nothing it points at is created in, chmodded or mounted. The folder Open returns
// is the one it checked, whatever later happens to its path. The caller closes it.
func Open(stateRoot, store string) (*os.File, error) {
	if err := ValidateStoreName(store); err != nil {
		return nil, err
	}
	dir := filepath.Join(stateRoot, store)
	for _, p := range []string{stateRoot, dir} {
		if err := checkRealDir(p); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(filepath.Dir(stateRoot), 0o700); err != nil {
		return nil, errs.Wrap(err, errs.IO, "can't create %s: %v", filepath.Dir(stateRoot), err)
	}
	if openCheckedHook != nil {
		openCheckedHook()
	}
	if err := syscall.Mkdir(stateRoot, 0o700); err != nil && err != syscall.EEXIST {
		return nil, errs.Wrap(err, errs.IO, "can't create the state folder %s: %v", stateRoot, err)
	}
	rootFd, err := openPrivateDir(atFDCWD, stateRoot, stateRoot)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(rootFd)
	if err := mkdirat(rootFd, store); err != nil && err != syscall.EEXIST {
		return nil, errs.Wrap(err, errs.IO, "can't create the state store %s: %v", dir, err)
	}
	fd, err := openPrivateDir(rootFd, store, dir)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), dir), nil
}

// openPrivateDir opens name relative to the folder at, never through a symlink, and sets it to
// 0700 through the descriptor.
func openPrivateDir(at int, name, path string) (int, error) {
	fd, err := openat(at, name, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.ENOTDIR) {
			return -1, errs.Wrap(err, errs.Denied, "the state folder %s was replaced by a symlink or a file while mur opened it, and mur changed nothing it points at; remove it and run again", path)
		}
		return -1, errs.Wrap(err, errs.IO, "can't open the state folder %s: %v", path, err)
	}
	if err := syscall.Fchmod(fd, 0o700); err != nil {
		syscall.Close(fd)
		return -1, errs.Wrap(err, errs.IO, "can't set %s to mode 0700: %v", path, err)
	}
	return fd, nil
}
