package main

import (
	"os"
	"path/filepath"

	"github.com/murmur-nexus/mur/internal/atomicfile"
	"github.com/murmur-nexus/mur/internal/errs"
)

// Home is the root of mur's per-user data: the CAS, compiled modules, state stores and fetch.
// Libraries never see this type: they take the folders below it as plain paths.
type Home struct{ Root string }

// resolveHome picks the home: the --home flag, else $MURMUR_HOME, else $HOME/.murmur. It touches
// nothing, so that read-only diagnostics can resolve paths without creating them.
func resolveHome(flag string) (Home, error) {
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

// Registries is the memory of which loopback registries speak plain HTTP (ocistore.Schemes).
func (h Home) Registries() string { return filepath.Join(h.Root, "registries") }

// ConfigFile is the user's config.yaml (SPEC section 13).
func (h Home) ConfigFile() string { return filepath.Join(h.Root, "config.yaml") }

// Ensure creates the home folder at 0700.
func (h Home) Ensure() error { return atomicfile.MkdirPrivate(h.Root) }
