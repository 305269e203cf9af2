package fetch

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/stage"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/lock"
)

// GCInput is one collection.
type GCInput struct {
	CAS *cas.Store
	// Project is the current project's folder, "" outside one: its lock is kept whether or not
	// it is registered.
	Project string
	// KeepLocks are more locks whose pins stay (--keep). Each must exist: a typo must not let gc
	// remove what the lock was meant to keep.
	KeepLocks []string
	OlderThan time.Duration // negative: remove nothing by age
	MaxSize   int64         // positive: then trim to this many bytes
	DryRun    bool
	Now       time.Time // zero means time.Now()
	// Evict removes what derives from a blob that goes (kept payloads, compiled modules).
	Evict func(ctx context.Context, d digest.Digest, dryRun bool) []string
}

// GCReport is what GC did, or would do.
type GCReport struct {
	cas.GCReport
	Roots       []string `json:"roots"`        // registered locks whose pins were kept
	PrunedRoots []string `json:"pruned_roots"` // registered locks that are gone, forgotten
	Staging     []string `json:"staging"`      // staging leftovers removed from tools/
	// Warnings are registered locks gc could not take as locks (not regular files): they pin
	// nothing.
	Warnings []string `json:"warnings"`
}

const whyRoots = "every project mur pulled into"

// GC is `mur cache gc` and the trim after a pull: the policy of what the CAS keeps. A blob stays
// when any registered lock that still exists pins it (every pull and warm registers its project's
// lock, as Nix registers gcroots), when the current project's lock or a lock named with --keep
// pins it, or when a pull in flight holds a lease on it. Registered locks that are gone are
// forgotten. Of the rest, blobs unused for OlderThan go, and then, while the cache is over
// MaxSize, the least recently used, each with what derives from it (Evict). Staging leftovers
// of killed pulls in the projects GC knows of go too.
func GC(ctx context.Context, in GCInput) (GCReport, error) {
	rep := GCReport{Roots: []string{}, PrunedRoots: []string{}, Staging: []string{}, Warnings: []string{}}
	for _, p := range in.KeepLocks {
		if _, err := os.Stat(p); err != nil {
			return rep, errs.Wrap(err, errs.Usage, "--keep %s: %v; give the path of a murmur.lock", p, errs.OSCause(err))
		}
	}
	now := in.Now
	if now.IsZero() {
		now = time.Now()
	}
	var current string
	if in.Project != "" {
		abs, err := filepath.Abs(pull.Project{Dir: in.Project}.LockPath())
		if err != nil {
			return rep, errs.Wrap(err, errs.IO, "the project folder %q can't be made absolute: %v", in.Project, err)
		}
		current = abs
	}
	projects := map[string]bool{}
	pinned := func(ctx context.Context) (map[digest.Digest]bool, error) {
		roots, err := in.CAS.Roots(ctx, now, in.DryRun)
		if err != nil {
			return nil, err
		}
		rep.Roots, rep.PrunedRoots = roots.Live, roots.Pruned
		keep := map[digest.Digest]bool{}
		add := func(path, why string) error {
			if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
				return nil // a project that pinned nothing yet
			}
			l, err := lock.Read(path)
			if errs.TokenOf(err) == errs.Denied && why == whyRoots {
				// Not a file mur wrote (a symlink to /dev/zero, a FIFO): it pins nothing mur
				// pulled, and one such root must not stop every gc on the machine.
				rep.Warnings = append(rep.Warnings, errs.Message(err)+"; gc took it as pinning nothing")
				return nil
			}
			if err != nil {
				return errs.Wrap(err, errs.TokenOf(err), "%s; gc keeps what %s pins and can't read it, so it removed nothing: fix it, or delete it if the project is gone, then run gc again", errs.Message(err), why)
			}
			for _, d := range l.Digests() {
				keep[d] = true
			}
			projects[filepath.Dir(path)] = true
			return nil
		}
		for _, p := range roots.Live {
			if err := add(p, whyRoots); err != nil {
				return nil, err
			}
		}
		if current != "" {
			if err := add(current, "the current project"); err != nil {
				return nil, err
			}
		}
		for _, p := range in.KeepLocks {
			if err := add(p, "--keep"); err != nil {
				return nil, err
			}
		}
		// The newest version list of each artifact is what an offline "latest" chooses from.
		if records, err := in.CAS.Records(""); err == nil {
			for _, r := range pull.NewestVersionLists(records) {
				keep[r.VersionList] = true
			}
		}
		return keep, nil
	}
	r, err := in.CAS.GC(ctx, cas.GCOptions{Pinned: pinned, OlderThan: in.OlderThan, MaxSize: in.MaxSize, DryRun: in.DryRun, Now: now, Evict: in.Evict})
	rep.GCReport = r
	if err != nil {
		return rep, err
	}
	for dir := range projects {
		rep.Staging = append(rep.Staging, stage.Sweep(stage.Tools{Project: dir}, now, in.DryRun)...)
	}
	return rep, nil
}
