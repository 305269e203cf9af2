package pull

import (
	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/internal/artifact"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
)

// undeclaredBound is the most bytes a download of a blob declared size bytes long may bring. A
// blob whose size no one declared (the lock pins its digest and the store no longer knows its
// tag) is bounded by the artifact ceiling: nothing bigger could be accepted anyway, and an endless
// body must not fill the disk.
func undeclaredBound(size int64) (int64, error) {
	if size >= 0 {
		return size, nil
	}
	return artifact.MaxPacked()
}

func undeclaredTooLong(store string, d digest.Digest, n ref.Name, version string, bound int64) error {
	return errs.New(errs.Integrity, "%s sent more than %d bytes for %s (%s@%s), whose size no manifest declares; a packed artifact is at most %s plus %d bytes; the transfer was stopped and nothing was kept; report it to the store's owner, or raise %s if the artifact is that large",
		store, bound, d, n, version, artifact.EnvMaxDecompressed, int64(artifact.PackedOverhead), artifact.EnvMaxDecompressed)
}
