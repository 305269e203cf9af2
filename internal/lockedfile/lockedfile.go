// Package lockedfile provides cross-process advisory locks on files, in the manner of cmd/go's
// internal/lockedfile: small, flock(2)-based, and released by the kernel when a process dies, so a
// SIGKILL never leaves a lock behind.
package lockedfile

import (
	"context"
	"errors"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/murmur-nexus/mur/internal/errs"
)

// Unlock releases a lock taken by Lock or RLock.
type Unlock func()

// Lock takes an exclusive lock on path, creating the file if needed, and waits for it until ctx
// is done.
func Lock(ctx context.Context, path string) (Unlock, error) {
	return lock(ctx, path, unix.LOCK_EX)
}

// RLock takes a shared lock on path, creating the file if needed.
func RLock(ctx context.Context, path string) (Unlock, error) {
	return lock(ctx, path, unix.LOCK_SH)
}

func lock(ctx context.Context, path string, how int) (Unlock, error) {
	// A lock file is mur's own and never a link: one planted in a cloned project would have mur
	// create a file wherever it points.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if errors.Is(err, unix.ELOOP) {
		target, _ := os.Readlink(path)
		return nil, errs.New(errs.Denied, "the lock file %s is a symlink to %s, and mur never locks through a link; remove the symlink (its target is untouched) and run again", path, target)
	}
	if err != nil {
		return nil, err
	}
	return wait(ctx, f, path, how)
}

// LockIn is Lock for the file name inside the folder root holds: a staging locks its tool
// through the scope folder it has open, so a folder swapped on the way can't move the lock.
func LockIn(ctx context.Context, root *os.Root, name string) (Unlock, error) {
	f, err := root.OpenFile(name, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if errors.Is(err, unix.ELOOP) {
		return nil, errs.New(errs.Denied, "the lock file %s in %s is a symlink, and mur never locks through a link; remove the symlink (its target is untouched) and run again", name, root.Name())
	}
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, errs.New(errs.Denied, "the lock file %s in %s is not a regular file; move it away and run again", name, root.Name())
	}
	return wait(ctx, f, name, unix.LOCK_EX)
}

func wait(ctx context.Context, f *os.File, path string, how int) (Unlock, error) {
	// A non-blocking try in a loop keeps the wait cancellable; flock itself can't take a context.
	delay := time.Millisecond
	for {
		err := unix.Flock(int(f.Fd()), how|unix.LOCK_NB)
		if err == nil {
			return func() { unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, &os.PathError{Op: "flock", Path: path, Err: err}
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(delay):
		}
		if delay < 50*time.Millisecond {
			delay *= 2
		}
	}
}
