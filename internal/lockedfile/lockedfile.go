// Package lockedfile provides cross-process advisory locks on files, in the manner of cmd/go's
// internal/lockedfile: small, flock(2)-based (LockFileEx on Windows), and released by the kernel
// when a process dies, so a SIGKILL never leaves a lock behind.
package lockedfile

import (
	"context"
	"os"
	"time"

	"github.com/murmur-nexus/mur/internal/errs"
)

// Unlock releases a lock taken by Lock or RLock.
type Unlock func()

// Lock takes an exclusive lock on path, creating the file if needed, and waits for it until ctx
// is done.
func Lock(ctx context.Context, path string) (Unlock, error) {
	return lock(ctx, path, exclusive)
}

// RLock takes a shared lock on path, creating the file if needed.
func RLock(ctx context.Context, path string) (Unlock, error) {
	return lock(ctx, path, shared)
}

func lock(ctx context.Context, path string, how lockType) (Unlock, error) {
	// A lock file is mur's own and never a link: one planted in a cloned project would have mur
	// create a file wherever it points.
	f, err := openLockFile(path)
	if err != nil {
		return nil, err
	}
	return wait(ctx, f, path, how)
}

// LockIn is Lock for the file name inside the folder root holds: a staging locks its tool
// through the scope folder it has open, so a folder swapped on the way can't move the lock.
func LockIn(ctx context.Context, root *os.Root, name string) (Unlock, error) {
	f, err := openLockFileIn(root, name)
	if err != nil {
		return nil, err
	}
	return wait(ctx, f, name, exclusive)
}

// TryLock takes an exclusive lock on the open file f without waiting, and TryRLock a shared one.
// They fail with an error Busy recognises when another open file holds a lock that conflicts.
// The lock lasts until f is closed.
func TryLock(f *os.File) error  { return tryLock(f, exclusive) }
func TryRLock(f *os.File) error { return tryLock(f, shared) }

// HoldDirIn opens the folder name in root, never through a symlink, and takes an exclusive lock
// on it without waiting, marking it as in use by this process: a folder whose lock can be taken
// belongs to a process that is gone. The lock lasts until the folder is closed. On Windows,
// which locks only files, it refuses.
func HoldDirIn(root *os.Root, name string) (*os.File, error) { return holdDirIn(root, name) }

// Busy reports whether err, from TryLock or TryRLock, says that another holds the lock.
func Busy(err error) bool { return isBusy(err) }

func wait(ctx context.Context, f *os.File, path string, how lockType) (Unlock, error) {
	// A non-blocking try in a loop keeps the wait cancellable; neither flock nor LockFileEx can
	// take a context.
	delay := time.Millisecond
	for {
		err := tryLock(f, how)
		if err == nil {
			return func() { unlock(f); f.Close() }, nil
		}
		if !isBusy(err) && !isInterrupted(err) {
			f.Close()
			return nil, &os.PathError{Op: lockOp, Path: path, Err: err}
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

func notRegularIn(root *os.Root, name string) error {
	return errs.New(errs.Denied, "the lock file %s in %s is not a regular file; move it away and run again", name, root.Name())
}
