package publish

import (
	"path/filepath"
	"strings"

	"github.com/murmur-nexus/mur/fetch/github"
	"github.com/murmur-nexus/mur/internal/artifact"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
)

// IndexFiles builds the murmur-index.json entries of packed files attached to one release.
func IndexFiles(files []string, scope, release, platform string) (*github.Index, error) {
	if err := ref.ValidateSegment(scope); err != nil {
		return nil, errs.New(errs.Usage, "--scope: %s", errs.Message(err))
	}
	if scope == ref.ScopeLocal {
		return nil, errs.New(errs.Usage, "scope local is reserved for files on disk; an index can't serve it")
	}
	if release == "" {
		return nil, errs.New(errs.Usage, "--release names the release tag the assets are attached to, e.g. --release v1.2.0")
	}
	ix := &github.Index{IndexVersion: 1, Scope: scope}
	for _, f := range files {
		a, c, err := artifact.Open(f)
		if err != nil {
			return nil, err
		}
		c.Close()
		name := a.Manifest.Name
		if s, n, ok := strings.Cut(name, "/"); ok {
			if s != scope {
				return nil, errs.New(errs.InvalidArtifact, "%s is packed as %s, which belongs to scope %s, not %s; index it under its own scope", f, name, s, scope)
			}
			name = n
		}
		if err := ref.ValidateSegment(name); err != nil {
			return nil, errs.New(errs.InvalidArtifact, "%s: packed name: %s", f, errs.Message(err))
		}
		d, n, err := hashFile(f)
		if err != nil {
			return nil, err
		}
		ix.Artifacts = append(ix.Artifacts, github.IndexEntry{
			Name: scope + "/" + name, Version: a.Manifest.Version, Platform: platform,
			Release: release, Asset: filepath.Base(f), Size: n, SHA256: d.Encoded(),
		})
	}
	merged := &github.Index{IndexVersion: 1, Scope: scope}
	if err := merged.Merge(ix); err != nil {
		return nil, err
	}
	return merged, nil
}
