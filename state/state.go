// Package state resolves and creates durable, capsule-scoped state stores.
//
// A store lives at $MURMUR_HOME/state/<store>/. A guest has one root, "/", its workdir scope;
// inside it, the sandbox's file system routes the first path component state (GuestDir) to the
// store, matching whole components: state/x, /state/x and ./state/x reach the store, while
// stateful.txt and state-notes stay in the workdir. Two properties of that layout are
// load-bearing:
//
//   - Stores sit outside every workdir. Any artifact holding the workdir could reach a
//     subdirectory of the workdir, and filesystem.scope, being a single prefix, cannot hide one
//     subtree from one artifact. A folder the workdir cannot name is the only version of this
//     that holds.
//   - Stores are keyed by capsule, not by workdir. A workdir-keyed store would let two capsules
//     launched in the same folder read each other's state with no grant on either side.
//
// Resolution (Reports) and creation (Ensure, Open) are separate so that
// `mur run --explain-scope` can print what a launch would open while touching nothing. A run
// holds its store (Hold) so that `mur state rm` (Remove) can't delete it from under a live
// guest; `mur state ls` is List.
package state

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/murmur-nexus/mur/internal/atomicfile"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/manifest"
)

// GuestDir is the first path component that leads a guest into its store: it writes
// state/<file>. There is no second preopen: Go (GOOS=wasip1) guests pick among preopens by plain
// string prefix, so a "/state" preopen would also swallow "/stateful.txt".
const GuestDir = "state"

// ValidateStoreName is the one store-name rule: name must be a single usable directory segment
// under the state root. Anything else could name a folder outside the root, or a hidden one in it.
func ValidateStoreName(name string) error {
	if problem := storeNameProblem(name); problem != "" {
		return errs.New(errs.InvalidManifest, "the state store name %q %s; capabilities.state.store must be a single folder name such as \"notes\" (no /, no \\, not starting with a dot); fix it in murmur.yaml", name, problem)
	}
	return nil
}

func storeNameProblem(name string) string {
	switch {
	case name == "":
		return "is empty"
	case strings.ContainsRune(name, 0):
		return "holds a NUL byte"
	case filepath.IsAbs(name) || strings.HasPrefix(name, "/") || strings.HasPrefix(name, `\`) || len(name) >= 2 && name[1] == ':':
		return "must not be absolute"
	case strings.ContainsAny(name, `/\`):
		return "must be a single folder name, without '/'"
	case strings.HasPrefix(name, "."):
		return "must not start with '.'"
	}
	return ""
}

// CheckCapsule holds every store name a capsule's murmur.yaml gives to ValidateStoreName, and
// names the file and line of the first one that fails.
func CheckCapsule(c *manifest.Capsule) error {
	for _, sn := range c.StoreNames {
		problem := storeNameProblem(sn.Store)
		if problem == "" {
			continue
		}
		err := ValidateStoreName(sn.Store)
		if sn.Key == "name" {
			return errs.Wrap(err, errs.InvalidManifest, "%s:%d: name %q can't name the state store (it %s); set capabilities.state.store to a plain name", c.Path, sn.Line, sn.Store, problem)
		}
		return errs.Wrap(err, errs.InvalidManifest, "%s:%d: %s %q is not a store name: it %s", c.Path, sn.Line, sn.Key, sn.Store, problem)
	}
	return nil
}

// Grant is one artifact's claim on a store, as the operator's manifest declares it.
type Grant struct {
	Artifact string
	Store    string
}

// Report is a resolved grant: which host folder the artifact's store would be.
type Report struct {
	Artifact string `json:"artifact"`
	Store    string `json:"store"`
	HostPath string `json:"host_path"`
}

// Reports resolves and validates every grant without touching the file system, so that a
// read-only diagnostic can show exactly what a launch would open.
func Reports(stateRoot string, grants []Grant) ([]Report, error) {
	out := make([]Report, 0, len(grants))
	for _, g := range grants {
		if err := ValidateStoreName(g.Store); err != nil {
			return nil, errs.Wrap(err, errs.InvalidManifest, "artifact %s: %s", g.Artifact, errs.Message(err))
		}
		out = append(out, Report{Artifact: g.Artifact, Store: g.Store, HostPath: filepath.Join(stateRoot, g.Store)})
	}
	return out, nil
}

// Ensure creates stateRoot and the store at 0700, reasserts 0700 on both (a folder loosened by
// hand is tightened again on the next launch) and returns the store's host path. A store that is
// a symlink or not a folder is refused: following it would mount whatever it points at.
func Ensure(stateRoot, store string) (string, error) {
	if err := ValidateStoreName(store); err != nil {
		return "", err
	}
	if err := ensurePrivateRealDir(stateRoot); err != nil {
		return "", err
	}
	dir := filepath.Join(stateRoot, store)
	if err := ensurePrivateRealDir(dir); err != nil {
		return "", err
	}
	return dir, nil
}

// checkRealDir refuses dir when it is a symlink or not a folder; a missing one is made later.
func checkRealDir(dir string) error {
	fi, err := os.Lstat(dir)
	switch {
	case err != nil:
		return nil
	case fi.Mode()&fs.ModeSymlink != 0:
		return errs.New(errs.Denied, "the state folder %s is a symlink, and mur only mounts real folders as state; remove the symlink (its target is untouched) and run again", dir)
	case !fi.IsDir():
		return errs.New(errs.Denied, "the state path %s is a %s, not a folder; move it away and run again", dir, kind(fi.Mode()))
	}
	return nil
}

// ensurePrivateRealDir creates dir at 0700, or tightens it back to 0700, unless it is a symlink
// or not a folder: following a symlink would mount (or chmod) whatever it points at.
func ensurePrivateRealDir(dir string) error {
	if fi, err := os.Lstat(dir); err == nil {
		if fi.Mode()&fs.ModeSymlink != 0 {
			return errs.New(errs.Denied, "the state folder %s is a symlink, and mur only mounts real folders as state; remove the symlink (its target is untouched) and run again", dir)
		}
		if !fi.IsDir() {
			return errs.New(errs.Denied, "the state path %s is a %s, not a folder; move it away and run again", dir, kind(fi.Mode()))
		}
	}
	return atomicfile.MkdirPrivate(dir)
}

func kind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "regular file"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "special file"
}
