package store

import (
	"context"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/internal/ref"
)

// Addressed is where a published payload sits in an OCI store, in the digests crane and oras
// address: the manifest that carries the payload as its layer and, when the tag holds several
// platforms, the index the tag points at.
type Addressed struct {
	Manifest digest.Digest
	Index    digest.Digest // "" when the tag points at the manifest itself
}

// ManifestAddresser is implemented by a store whose payloads sit under OCI manifests.
type ManifestAddresser interface {
	// Addressed reads back what name@version's tag holds for platform.
	Addressed(ctx context.Context, name ref.Name, version, platform string) (Addressed, error)
}

// AddressOf reads back where desc sits in dst after Publish, so that a user can hand the
// digest to crane or oras; a store without manifests answers a zero Addressed.
func AddressOf(ctx context.Context, dst Store, desc Descriptor) (Addressed, error) {
	a, ok := dst.(ManifestAddresser)
	if !ok {
		return Addressed{}, nil
	}
	return a.Addressed(ctx, desc.Name, desc.Version, desc.Platform)
}

// BundleFinder is implemented by the stores and sources that can hold an artifact's Sigstore
// bundles: GitHub's attestations API and release assets, and OCI referrers. Bundles returns the
// bundles that may speak for d (unverified), and none, without an error, when there are none.
type BundleFinder interface {
	Bundles(ctx context.Context, name ref.Name, version string, d digest.Digest) ([][]byte, error)
}

// BundleAttacher is implemented by the stores that can keep bundles beside an artifact (OCI
// referrers), for `mur push` and the write-through mirror.
type BundleAttacher interface {
	AttachBundle(ctx context.Context, name ref.Name, version string, d digest.Digest, bundle []byte) error
}
