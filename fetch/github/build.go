package github

import (
	"errors"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/murmur-nexus/mur/internal/artifact"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/internal/safefile"
	"github.com/murmur-nexus/mur/lock"
)

// IndexFiles builds the murmur-index.json entries of packed files attached to one release,
// published now.
func IndexFiles(files []string, scope, release, platform string) (*Index, error) {
	return IndexFilesAt(files, scope, release, platform, time.Now())
}

// IndexFilesAt is IndexFiles with the entries' published time given: a publisher back-filling
// an index gives each release's own date, and tests a fixed one.
func IndexFilesAt(files []string, scope, release, platform string, published time.Time) (*Index, error) {
	if err := ref.ValidateSegment(scope); err != nil {
		return nil, errs.New(errs.Usage, "--scope: %s", errs.Message(err))
	}
	if err := lock.CheckScopeSource(scope, ""); err != nil {
		return nil, errs.Wrap(err, errs.Usage, "%s; an index can't serve it", errs.Message(err))
	}
	if release == "" {
		return nil, errs.New(errs.Usage, "--release names the release tag the assets are attached to, e.g. --release v1.2.0")
	}
	// Seconds are enough for a release age, and keep the field one fixed shape.
	stamp := published.UTC().Truncate(time.Second).Format(time.RFC3339)
	ix := &Index{IndexVersion: 1, Scope: scope}
	for _, f := range files {
		a, c, err := artifact.Open(f)
		if err != nil {
			return nil, err
		}
		c.Close()
		// The reader has already refused a packed name that is not one bare segment (a scoped
		// name included), so the name is the scope's to claim.
		name := a.Manifest.Name
		d, n, err := artifact.HashFile(f)
		if err != nil {
			return nil, err
		}
		ix.Artifacts = append(ix.Artifacts, IndexEntry{
			Name: scope + "/" + name, Version: a.Manifest.Version, Platform: platform,
			Release: release, Asset: filepath.Base(f), Size: n, SHA256: d.Encoded(),
			Published: stamp,
		})
	}
	merged := &Index{IndexVersion: 1, Scope: scope}
	if err := merged.Merge(ix); err != nil {
		return nil, err
	}
	return merged, nil
}

// ReadIndexFile reads the murmur-index.json at path, a file the publisher named (mur index
// --merge): through a symlink they chose, but only a regular file, never blocking on a FIFO, and
// no more than the bound of an index read from a release, so that /dev/zero or a planted FIFO
// neither exhausts memory nor hangs the command.
func ReadIndexFile(path string) (*Index, error) {
	b, err := safefile.ReadNamed(path, maxIndexBytes)
	var nr *safefile.NotRegularError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, errs.Wrap(err, errs.NotFound, "index %s does not exist; give the murmur-index.json to merge, or leave --merge out to start a new one", path)
	case errors.As(err, &nr):
		return nil, errs.Wrap(err, errs.Usage, "index %s is %s, not a regular file; give the murmur-index.json file itself", path, nr.Found)
	case errors.Is(err, safefile.ErrTooLarge):
		return nil, errs.Wrap(err, errs.IndexMismatch, "index %s is over %d bytes, far more than an index of 10,000 entries (about 3 MiB); check that it is a murmur-index.json", path, maxIndexBytes)
	case err != nil:
		return nil, errs.Wrap(err, errs.IO, "can't read index %s: %v", path, errs.OSCause(err))
	}
	ix, err := ParseIndex(b)
	if err != nil {
		return nil, errs.Wrap(err, errs.TokenOf(err), "%s: %s", path, errs.Message(err))
	}
	return ix, nil
}
