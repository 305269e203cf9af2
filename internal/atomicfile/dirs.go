package atomicfile

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/murmur-nexus/mur/internal/errs"
)

// MkdirPrivate creates dir and its missing parents at 0700 and reasserts 0700 on dir itself, so
// that a folder someone loosened by hand is tightened again on the next use. A folder that is
// already private is not written to, so that a read-only home (a restored CI cache) still reads.
func MkdirPrivate(dir string) error {
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() && fi.Mode().Perm() == 0o700 {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return errs.Wrap(err, errs.IO, "can't create %s: %v; check that its parent is writable and the disk is not full", dir, errs.OSCause(err))
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return errs.Wrap(err, errs.IO, "can't set %s to mode 0700: %v", dir, errs.OSCause(err))
	}
	return nil
}

// Within reports whether p is dir or lies below it, comparing cleaned paths lexically (component
// by component, never as string prefixes). Both must be absolute, or both relative to the same
// folder; "." as dir holds every relative path that does not climb out with "..".
func Within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
