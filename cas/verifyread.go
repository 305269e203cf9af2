package cas

import (
	"context"
	"crypto/sha256"
	"hash"
	"io"
	"os"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/internal/bufpool"
)

// VerifyRead re-hashes the blob with digest d in one sequential read and lets inspect look at
// the same bytes on their way: blob reads any offset (a zip's directory, a few KiB at its end),
// and stream gives the blob from its first byte, in order, each byte hashed as it passes. What
// inspect leaves unread is hashed after it returns, so the blob is read once for both. Reads are
// plain reads, never a mapping, so a failing disk is an error rather than a SIGBUS.
//
// A blob whose bytes do not hash to d is quarantined and is an errs.Integrity error, whatever
// inspect returned: what it found in damaged bytes says nothing of the pinned ones. A read that
// fails is that error. Otherwise the error is inspect's.
func (s *Store) VerifyRead(ctx context.Context, d digest.Digest, inspect func(blob ReaderAt, stream io.Reader) error) error {
	_, found, err := s.verifyRead(ctx, d, inspect)
	if err != nil {
		return err
	}
	return found
}

// verifyRead is VerifyRead, returning the bytes read, what inspect found of bytes that hash
// right, and apart from it any failure to read or hash them.
func (s *Store) verifyRead(ctx context.Context, d digest.Digest, inspect func(blob ReaderAt, stream io.Reader) error) (int64, error, error) {
	f, err := s.open(d)
	if err != nil {
		return 0, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, nil, pathErr(err, "reading", f.Name())
	}
	h := sha256.New()
	stream := &hashingReader{ctx: ctx, f: f, h: h}
	found := inspect(&fileBlob{f: f, size: fi.Size()}, stream)
	if stream.err == nil {
		buf := bufpool.Get(chunkSize)
		for stream.err == nil {
			stream.Read(*buf)
		}
		bufpool.Put(buf)
	}
	if stream.err != io.EOF {
		if err := ctx.Err(); err != nil {
			return stream.n, nil, err
		}
		return stream.n, nil, pathErr(stream.err, "reading", f.Name())
	}
	if got := digest.NewDigest(digest.SHA256, h); got != d {
		return stream.n, nil, s.damaged(f, d, got)
	}
	return stream.n, found, nil
}

// hashingReader reads a blob file from its current offset and hashes every byte it returns. Its
// first error sticks, so VerifyRead can tell a read that failed from what inspect made of it.
type hashingReader struct {
	ctx context.Context
	f   *os.File
	h   hash.Hash
	n   int64 // bytes read
	err error
}

func (r *hashingReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if err := r.ctx.Err(); err != nil {
		r.err = err
		return 0, err
	}
	n, err := r.f.Read(p)
	r.h.Write(p[:n])
	r.n += int64(n)
	if err != nil {
		r.err = err
	}
	return n, err
}
