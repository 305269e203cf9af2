//go:build !linux

package atomicfile

import (
	"errors"
	"os"
)

// OpenUnnamed always fails here: only Linux makes a file without a name (O_TMPFILE), and one
// named now could be left behind by a killed process, which is what the unnamed file avoids.
// Callers fall back to writing a named file as usual.
func OpenUnnamed(dir string, perm os.FileMode) (*os.File, error) {
	return nil, &os.PathError{Op: "open unnamed", Path: dir, Err: errors.ErrUnsupported}
}

// LinkUnnamed fails as OpenUnnamed does; no file from it can reach here.
func LinkUnnamed(f, dir *os.File, name string) error {
	return &os.PathError{Op: "link unnamed", Path: name, Err: errors.ErrUnsupported}
}
