package fetch

import (
	"context"
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

// VerifyCache is `mur cache verify`: every blob of s re-hashed, and every zip among them held to
// what a pull checks (CheckCachedBlob) in the same read; what fails either is quarantined and
// listed. A decompression ceiling set wrong fails it before any blob is judged: every artifact
// would be refused, and moved to quarantine.
func VerifyCache(ctx context.Context, s *cas.Store) (cas.VerifyReport, error) {
	if _, err := artifact.MaxDecompressed(); err != nil {
		return cas.VerifyReport{}, err
	}
	return s.VerifyAllWith(ctx, 0, CheckCachedBlob)
}

// CheckCachedBlob is CheckImportedBlob for a blob already in the CAS, as `mur cache verify`
// re-hashes it (VerifyCache): stream is the blob from its first byte, which the
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
