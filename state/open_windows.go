package state

import (
	"os"
	"path/filepath"

	"github.com/murmur-nexus/mur/internal/errs"
)

// Open refuses on Windows. Its promise is that a store swapped for a symlink after the checks
// is refused, and nothing it points at is created in, tightened or mounted; mur keeps it with unix
// calls on folder descriptors (an openat that never follows a link, fchmod to 0700), and a
// Windows folder is private by its ACL, not by mode bits, so neither half carries over. Only the
// sandbox opens a store, and it refuses on Windows before it gets here.
func Open(stateRoot, store string) (*os.File, error) {
	if err := ValidateStoreName(store); err != nil {
		return nil, err
	}
	return nil, errs.New(errs.Denied, "mur can't open the state store %s on Windows: it opens a store only through folder descriptors that never follow a symlink and makes it private (0700) through them, which it can't do on Windows, and it won't mount a store it could not check that way; run mur on Linux or macOS (WSL works) for capsules with capabilities.state", filepath.Join(stateRoot, store))
}
