package safefile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/murmur-nexus/mur/internal/errs"
)

// ReadProject reads a file a project carries (murmur.yaml, murmur.lock, .murmur/config.yaml),
// which came with a clone from anyone. It is read only as a regular file, so that one committed
// as a symlink to a secret is never read into an error message and one pointing at /dev/zero or
// a FIFO never exhausts memory or blocks; and only up to max bytes, past which tooBig is the
// error's token. A symlinked .murmur/ holding the file is refused the same way. A missing file is
// an error that wraps fs.ErrNotExist, for the caller to treat as it does today.
func ReadProject(path string, max int64, tooBig errs.Token) ([]byte, error) {
	if err := refuseLinkedParent(path); err != nil {
		return nil, err
	}
	data, err := ReadFile(path, max)
	var nr *NotRegularError
	switch {
	case err == nil:
		return data, nil
	case errors.As(err, &nr) && nr.Found == "a folder":
		return nil, errs.Wrap(err, errs.IO, "can't read %s: it is a folder, where a file was expected; move it aside", path)
	case errors.As(err, &nr):
		return nil, errs.Wrap(err, errs.Denied, "%s is %s; mur reads a project's files only as regular files, so that a cloned repository can't point them at a file elsewhere; replace it with the file itself", path, nr.Found)
	case errors.Is(err, ErrTooLarge):
		return nil, errs.Wrap(err, tooBig, "%s is over %d bytes; that is far more than any such file holds, so mur did not read it; check what the file is", path, max)
	case errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	return nil, errs.Wrap(err, errs.IO, "can't read %s: %v", path, errs.OSCause(err))
}

// refuseLinkedParent refuses a project file inside a symlinked .murmur/.
func refuseLinkedParent(path string) error {
	dir := filepath.Dir(path)
	if filepath.Base(dir) != ".murmur" {
		return nil
	}
	fi, err := os.Lstat(dir)
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		return nil
	}
	target, _ := os.Readlink(dir)
	return errs.New(errs.Denied, "%s is a symlink to %s, and mur never follows a project's .murmur/ through a symlink, which a cloned repository could point anywhere; replace it with a real folder (removing the symlink leaves its target untouched)", dir, target)
}
