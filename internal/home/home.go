// Package home locates the Murmur home and keeps its folders private.
package home

import (
	"os"
	"path/filepath"

	"github.com/murmur-nexus/mur/internal/errs"
)

// Home is the root of mur's per-user data: the CAS, compiled modules, state stores and config.
type Home struct{ Root string }

// Resolve picks the home: the --home flag, else $MURMUR_HOME, else $HOME/.murmur. It touches
// nothing, so that read-only diagnostics can resolve paths without creating them.
func Resolve(flag string) (Home, error) {
	root := flag
	if root == "" {
		root = os.Getenv("MURMUR_HOME")
	}
	if root == "" {
		h := os.Getenv("HOME")
		if h == "" || !filepath.IsAbs(h) {
			return Home{}, errs.New(errs.Usage, "HOME is %q, and mur needs an absolute HOME or MURMUR_HOME to find its home; set MURMUR_HOME=/abs/path or pass --home", h)
		}
		root = filepath.Join(h, ".murmur")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return Home{}, errs.Wrap(err, errs.Usage, "the Murmur home %q can't be made absolute: %v", root, err)
	}
	return Home{Root: abs}, nil
}

// CAS is the folder of the content-addressed store.
func (h Home) CAS() string { return filepath.Join(h.Root, "cas") }

// Compiled is the folder of wazero's compilation cache.
func (h Home) Compiled() string { return filepath.Join(h.Root, "compiled") }

// State is the parent of every state store.
func (h Home) State() string { return filepath.Join(h.Root, "state") }

// ConfigFile is the user's config.yaml.
func (h Home) ConfigFile() string { return filepath.Join(h.Root, "config.yaml") }

// EnsurePrivateDir creates dir and its missing parents at 0700 and reasserts 0700 on dir itself,
// so that a folder someone loosened by hand is tightened again on the next use.
func EnsurePrivateDir(dir string) error {
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() && fi.Mode().Perm() == 0o700 {
		// Already private: no write, so that a read-only home (a restored CI cache) still reads.
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return errs.Wrap(err, errs.IO, "can't create %s: %v; check that its parent is writable and the disk is not full", dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return errs.Wrap(err, errs.IO, "can't set %s to mode 0700: %v", dir, err)
	}
	return nil
}

// Ensure creates the home folder at 0700.
func (h Home) Ensure() error { return EnsurePrivateDir(h.Root) }
