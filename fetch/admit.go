package fetch

import (
	"errors"
	"io"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/internal/artifact"
)

// CheckImportedBlob is what `mur cache import` checks of each blob of a bundle before the CAS
// admits it (cas.Store.Import's check): artifact.CheckBlob, the check a pull's stream makes, so
// that import admits no packed artifact a pull refuses. mur verify relies on it: once a blob
// hashes right it re-reads only the zip's directory. A blob that is no zip at all (a provenance
// bundle, a version list) is admitted as it is; mur never installs it, and a pull or verify
// that reads it as an artifact refuses it. Any zip is judged as a packed artifact.
func CheckImportedBlob(blob cas.ReaderAt) error { return CheckCachedBlob(blob, nil) }

// CachedBlobCheck returns CheckCachedBlob once the decompression ceiling in force reads: a
// ceiling set wrong would refuse every artifact, and `mur cache verify` would move them all to
// quarantine, so it fails the command before any blob is judged.
func CachedBlobCheck() (func(blob cas.ReaderAt, stream io.Reader) error, error) {
	if _, err := artifact.MaxDecompressed(); err != nil {
		return nil, err
	}
	return CheckCachedBlob, nil
}

// CheckCachedBlob is CheckImportedBlob for a blob already in the CAS, as `mur cache verify`
// re-hashes it (cas.Store.VerifyAllWith): stream is the blob from its first byte, which the
// check reads for the hash too.
func CheckCachedBlob(blob cas.ReaderAt, stream io.Reader) error {
	_, err := artifact.CheckBlob(blob, blob.Size(), stream)
	if errors.Is(err, artifact.ErrNotZip) {
		return nil
	}
	// A ceiling set wrong (MURMUR_MAX_ARTIFACT_DECOMPRESSED_BYTES) is returned too: no entry
	// could be judged, so none is admitted.
	return err
}
