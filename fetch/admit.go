package fetch

import (
	"errors"
	"io"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/internal/artifact"
	"github.com/murmur-nexus/mur/internal/errs"
)

// CheckImportedBlob is what `mur cache import` checks of each blob of a bundle before the CAS
// admits it (cas.Store.Import's check): a blob that reads as a packed artifact must have entries
// of the sizes and CRC-32 its zip records, decompressing within the ceiling, as a pull checks
// them. mur verify relies on it: once a blob hashes right it re-reads only the zip's directory.
// A blob that is no packed artifact (a provenance bundle, a version list) is admitted as it is;
// mur never installs it, and a pull or verify that reads it as an artifact refuses it.
func CheckImportedBlob(blob cas.ReaderAt) error {
	a, err := artifact.Read(blob, blob.Size())
	if errors.Is(err, errs.InvalidArtifact) {
		return nil
	}
	if err != nil {
		// The ceiling's setting is wrong: no entry could be judged, so none is admitted.
		return err
	}
	return a.CheckStream(io.NewSectionReader(blob, 0, blob.Size()))
}
