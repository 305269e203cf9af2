package artifact

import (
	"errors"
	"io"
)

// ErrNotZip is wrapped by Read's refusal of bytes that are no zip archive at all: no packed
// artifact, but maybe another blob the CAS keeps (a provenance bundle, a version list, both
// JSON), which CheckBlob's callers admit as it is. Any zip is judged as a packed artifact.
var ErrNotZip = errors.New("not a zip archive")

// notZip is the cause Read gives for bytes zip can't open: the zip reader's own error, which
// errors.Is also finds as ErrNotZip.
type notZip struct{ error }

func (e notZip) Is(target error) bool { return target == ErrNotZip }
func (e notZip) Unwrap() error        { return e.error }

// CheckBlob is the one check every path that admits or keeps a blob as a packed artifact makes,
// short of a pull's own (which streams the same entries through the same decompressors as they
// download): Read (the directory, murmur.yaml, the payload's first bytes), then CheckStream
// (every entry decompressed to its end within its recorded size, the ceiling and zstd's
// window, with its recorded CRC-32). `mur cache import` runs it on each blob before the CAS
// admits it, and `mur cache verify` on each blob it re-hashes, so neither accepts what a pull
// refuses. stream, when not nil, gives the blob from its first byte, in order (a re-hash in
// progress: cas.Store.VerifyRead), else the blob is read once more. Bytes that are no zip are
// an error that wraps ErrNotZip.
func CheckBlob(blob io.ReaderAt, size int64, stream io.Reader) (*Archive, error) {
	a, err := Read(blob, size)
	if err != nil {
		return nil, err
	}
	if stream == nil {
		stream = io.NewSectionReader(blob, 0, size)
	}
	if err := a.CheckStream(stream); err != nil {
		return nil, err
	}
	return a, nil
}
