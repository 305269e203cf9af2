package lock

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"

	"github.com/murmur-nexus/mur/internal/errs"
)

// Unchanged runs fn on the lock at path as Update does, and writes nothing: a change fn would
// make is a lock-mismatch error. It is --locked's Update. It takes no file lock, because even
// the lock's guard file would be a write; the lock is replaced by rename, so a read is never torn.
func Unchanged(ctx context.Context, path string, fn func(*Lock) error) error {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return errs.Wrap(err, errs.IO, "can't read %s: %v", path, err)
	}
	l := &Lock{Scopes: map[string]ScopePin{}}
	if err == nil {
		if l, err = Parse(old, path); err != nil {
			return err
		}
	}
	before := l.Marshal()
	if err := fn(l); err != nil {
		return err
	}
	if !bytes.Equal(before, l.Marshal()) {
		return WouldChange(path)
	}
	return nil
}

// WouldChange is the lock-mismatch error of a --locked command that would change the lock at
// path.
func WouldChange(path string) error {
	return errs.New(errs.LockMismatch, "%s would change (a pin or an owner pin it lacks), and --locked writes nothing\nrun 'mur lock' to pin what murmur.yaml declares, then commit murmur.lock", path)
}
