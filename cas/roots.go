package cas

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/murmur-nexus/mur/internal/atomicfile"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/lockedfile"
	"github.com/murmur-nexus/mur/internal/safefile"
)

// GC roots, the way Nix keeps gcroots: every file that pins blobs (a project's murmur.lock) is
// registered by the commands that write or use it, so that GC run anywhere keeps what any project
// on the machine pins, not only the locks named on its command line. A root is a file in roots/
// named by the hash of the path it names, holding that path. A root whose file is gone (the
// project was deleted or moved) is removed by GC.
//
// A pull registers its lock just before it writes it and again after: a process killed between
// the write and the second registration must not leave a lock that no root names once its lease
// is gone. So GC removes a root only when its file is missing and the root was not registered
// for RootGrace: a root registered for a lock about to be written survives that moment. Pruning
// runs under a lock that registering shares, so that a registration never lands between GC's
// check and its removal.

// maxRootFile bounds what is read of a root: one absolute path and a newline.
const maxRootFile = 8 << 10

// RootGrace is how long a root whose file is missing is kept after it was last registered.
const RootGrace = 10 * time.Minute

func (s *Store) rootsLock() string { return filepath.Join(s.root, "roots.lock") }

func rootName(path string) string {
	sum := sha256.Sum256([]byte(path))
	return hex.EncodeToString(sum[:])
}

// RegisterRoot records that the file at path (absolute) pins blobs that GC must keep. Call it
// before and after each write of the file: it is cheap when the root is already there.
func (s *Store) RegisterRoot(ctx context.Context, path string) error {
	if !filepath.IsAbs(path) || strings.ContainsAny(path, "\n\x00") {
		return errs.New(errs.Internal, "a GC root must be an absolute path on one line, found %q", path)
	}
	path = filepath.Clean(path)
	if _, err := os.Stat(s.roots); errors.Is(err, fs.ErrNotExist) && readOnly(s.root) {
		return nil // a read-only home, where no gc can run
	}
	if err := atomicfile.MkdirPrivate(s.roots); err != nil {
		return err
	}
	p := filepath.Join(s.roots, rootName(path))
	unlock, err := lockedfile.RLock(ctx, s.rootsLock())
	if errors.Is(err, syscall.EROFS) {
		return nil
	}
	if err != nil {
		return pathErr(err, "locking", s.rootsLock())
	}
	defer unlock()
	if b, err := safefile.ReadFile(p, maxRootFile); err == nil && string(b) == path+"\n" {
		if err := touchNoFollow(p, time.Now()); err != nil {
			return pathErr(err, "registering the GC root", p)
		}
		return nil
	}
	if err := atomicfile.WriteFile(p, []byte(path+"\n"), 0o600); err != nil {
		return pathErr(err, "registering the GC root", p)
	}
	return nil
}

// RootsReport is what Roots found.
type RootsReport struct {
	Live   []string // paths of registered files that exist, sorted
	Pruned []string // paths whose file is gone; their roots were removed (or would be, on a dry run)
}

// Roots lists the registered roots, removing those whose file no longer exists and that were not
// registered within RootGrace of now (with dryRun, listing them only). A root whose file can't be
// checked (a folder it may not search) is kept.
func (s *Store) Roots(ctx context.Context, now time.Time, dryRun bool) (RootsReport, error) {
	unlock, err := lockedfile.Lock(ctx, s.rootsLock())
	if err != nil {
		return RootsReport{}, pathErr(err, "locking", s.rootsLock())
	}
	defer unlock()
	rep := RootsReport{Live: []string{}, Pruned: []string{}}
	entries, err := os.ReadDir(s.roots)
	if errors.Is(err, fs.ErrNotExist) {
		return rep, nil
	}
	if err != nil {
		return RootsReport{}, pathErr(err, "listing", s.roots)
	}
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		p := filepath.Join(s.roots, e.Name())
		if strings.HasPrefix(e.Name(), atomicfile.TempPrefix) {
			// A registration killed mid-write; registering happens under the shared lock, and
			// this runs under the exclusive one, so none is in flight.
			if !dryRun {
				os.Remove(p)
			}
			continue
		}
		b, err := safefile.ReadFile(p, maxRootFile)
		if notRegular(err) || errors.Is(err, safefile.ErrTooLarge) {
			// Not a root mur wrote: a FIFO here would hang every gc, a link would be read
			// through. It pins nothing.
			if !dryRun {
				s.moveAside(p)
			}
			continue
		}
		if err != nil {
			continue
		}
		path := string(bytes.TrimSuffix(b, []byte("\n")))
		if !filepath.IsAbs(path) || rootName(path) != e.Name() {
			// Not a root mur wrote; it pins nothing.
			if !dryRun {
				os.Remove(p)
			}
			continue
		}
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			if fi, err := e.Info(); err == nil && now.Sub(fi.ModTime()) < RootGrace {
				rep.Live = append(rep.Live, path) // registered for a lock about to be written
				continue
			}
			if !dryRun {
				if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return rep, pathErr(err, "removing the GC root", p)
				}
			}
			rep.Pruned = append(rep.Pruned, path)
			continue
		}
		rep.Live = append(rep.Live, path)
	}
	sort.Strings(rep.Live)
	sort.Strings(rep.Pruned)
	return rep, nil
}
