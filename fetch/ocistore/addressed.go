package ocistore

import (
	"context"

	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
)

// Addressed reads back the manifest (and index) digests of name@version for platform.
func (s *registryStore) Addressed(ctx context.Context, name ref.Name, version, platform string) (store.Addressed, error) {
	return addressed(ctx, s, s.repoPath(name), ref.TagFromVersion(version), platform)
}

// Addressed reads back the manifest (and index) digests of name@version for platform.
func (s *layoutStore) Addressed(ctx context.Context, name ref.Name, version, platform string) (store.Addressed, error) {
	return addressed(ctx, s, name.String(), ref.TagFromVersion(version), platform)
}

func addressed(ctx context.Context, r manifestReader, repo, tag, platform string) (store.Addressed, error) {
	mt, raw, err := r.root(ctx, repo, tag)
	if err != nil {
		return store.Addressed{}, err
	}
	tc, err := readTag(ctx, r, repo, tag)
	if err != nil {
		return store.Addressed{}, err
	}
	var a store.Addressed
	if mt == types.OCIImageIndex {
		a.Index = digest.Digest(sha256Hash(raw).String())
	}
	for _, c := range tc.children {
		if c.Annotations[annotationPlatform] == platform {
			a.Manifest = digest.Digest(c.Digest.String())
			return a, nil
		}
	}
	return store.Addressed{}, errs.New(errs.NotFound, "%s holds no manifest for platform %s after the push; another push may have replaced it; run 'mur pull' against the store to see what it holds", r.where(repo, tag), platform)
}
