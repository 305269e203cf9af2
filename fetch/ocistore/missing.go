package ocistore

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
)

// explainMiss says of a miss of name@version what the store does hold: the versions of name (the
// newest 10), or, when it holds none, a name it lists that looks like name ("did you mean"). An
// answer it can't get leaves the miss as it was: it is a hint, not a second failure.
func explainMiss(err error, where string, n ref.Name, version string, tags func() ([]string, error), names func() []string) error {
	if !errors.Is(err, errs.NotFound) {
		return err
	}
	var versions []string
	if ts, terr := tags(); terr == nil {
		versions = listedVersions(ts)
	}
	if len(versions) > 0 {
		if version == ref.Latest || slices.Contains(versions, version) {
			return err // the version is there: the miss is about its platform or its bytes
		}
		// The repository exists: what it holds says more than the store's whole ref list.
		if v := ref.DropV(version, versions); v != "" {
			return errs.Wrap(err, errs.NotFound, "%s has no %s@%s; it holds, newest first: %s; drop the v: %s@%s", where, n, version, ref.ListVersions(versions), n, v)
		}
		return errs.Wrap(err, errs.NotFound, "%s has no %s@%s; it holds, newest first: %s; pick one of those, or use latest", where, n, version, ref.ListVersions(versions))
	}
	if c := ref.Closest(n.String(), names()); c != "" {
		return errs.Wrap(err, errs.NotFound, "%s; %s holds no artifact %s: did you mean %s?", strings.TrimSuffix(errs.Message(err), "."), where, n, c)
	}
	return err
}

// artifactNames lists the artifacts a layout holds, from its ref names.
func (s *layoutStore) artifactNames() []string {
	idx, _, err := s.readIndex()
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range idx.entries {
		if repo, _, ok := strings.Cut(e.Annotations[AnnotationRefName], ":"); ok && !slices.Contains(out, repo) {
			out = append(out, repo)
		}
	}
	return out
}

// registryTags lists the tags of repo.
func (s *registryStore) registryTags(ctx context.Context, repo string) ([]string, error) {
	r, err := s.repository(repo)
	if err != nil {
		return nil, err
	}
	opts, err := s.pullOptions(ctx, r)
	if err != nil {
		return nil, err
	}
	return remote.List(r, opts...)
}

// artifactNames lists the artifacts under the store's prefix, from the registry's catalog; many
// registries refuse the catalog, and then there is nothing to suggest.
func (s *registryStore) artifactNames(ctx context.Context) []string {
	reg, err := name.NewRegistry(s.host, s.nameOpts...)
	if err != nil {
		return nil
	}
	repos, err := remote.Catalog(ctx, reg, remote.WithTransport(s.rt), remote.WithAuthFromKeychain(s.keychain))
	if err != nil {
		return nil
	}
	var out []string
	for _, r := range repos {
		if rest, ok := strings.CutPrefix(r, strings.TrimPrefix(s.prefix+"/", "/")); ok && strings.Count(rest, "/") == 1 {
			out = append(out, rest)
		}
	}
	return out
}
