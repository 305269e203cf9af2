package cas

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/internal/atomicfile"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/safefile"
)

// ReaderAt is an open blob, read at any offset; the shape of containerd's content.ReaderAt. It
// stays readable after a concurrent gc removes the blob's name.
type ReaderAt interface {
	io.ReaderAt
	io.Closer
	// Size is the blob's length in bytes.
	Size() int64
}

// RangeCopier is what a ReaderAt of a blob on disk also offers: a copy of a byte range that the
// kernel does when it can, so that staging a large stored payload costs no trip through memory.
type RangeCopier interface {
	CopyRange(dst io.Writer, off, n int64) (int64, error)
}

// ReaderAt opens the blob with digest d without checking its bytes: for callers that check what
// they read themselves, or only read a little of it (a zip's directory). A blob that is not there
// is an errs.NotFound error.
func (s *Store) ReaderAt(ctx context.Context, d digest.Digest) (ReaderAt, error) {
	f, err := s.open(d)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, pathErr(err, "reading", f.Name())
	}
	return &fileBlob{f: f, size: fi.Size()}, nil
}

// VerifiedReaderAt opens the blob with digest d and hashes all of it before returning, so that
// every byte read from it is the byte pinned. The blob is mapped into memory (with its pages
// faulted in at once), which is the fast way to read a whole payload. A blob whose bytes no longer
// match d is quarantined, so that the next pull fetches it again, and is an errs.Integrity error.
func (s *Store) VerifiedReaderAt(ctx context.Context, d digest.Digest) (ReaderAt, error) {
	f, err := s.open(d)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, pathErr(err, "reading", f.Name())
	}
	data, unmap, err := atomicfile.Map(f, fi.Size())
	if err != nil {
		return nil, pathErr(err, "reading", f.Name())
	}
	if err := ctx.Err(); err != nil {
		unmap()
		return nil, err
	}
	if got := digest.FromBytes(data); got != d {
		unmap()
		return nil, s.damaged(f, d, got)
	}
	return &mappedBlob{data: data, unmap: unmap}, nil
}

// open opens the blob file itself; every read of a blob starts here.
func (s *Store) open(d digest.Digest) (*os.File, error) {
	if err := checkDigest(d); err != nil {
		return nil, err
	}
	// Never through a link, and never blocking on a FIFO planted where a blob should be.
	f, err := safefile.OpenRead(s.Path(d))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errs.Wrap(err, errs.NotFound, "blob %s is not in the store at %s; pull the artifact that holds it", d, s.root)
	}
	if notRegular(err) {
		return nil, errs.Wrap(err, errs.IO, "blob %s in the store at %s is not a file mur wrote: %v; mur reads no blob through it. Remove %s and pull the artifact again", d, s.root, err, s.Path(d))
	}
	if err != nil {
		return nil, pathErr(err, "opening", s.Path(d))
	}
	return f, nil
}

type fileBlob struct {
	f    *os.File
	size int64
}

func (b *fileBlob) ReadAt(p []byte, off int64) (int, error) { return b.f.ReadAt(p, off) }
func (b *fileBlob) Size() int64                             { return b.size }
func (b *fileBlob) Close() error                            { return b.f.Close() }

// CopyRange copies n bytes from off to dst, in the kernel (copy_file_range) when dst is a file.
func (b *fileBlob) CopyRange(dst io.Writer, off, n int64) (int64, error) {
	if f, ok := dst.(*os.File); ok {
		// *os.File.ReadFrom of a LimitedReader over an *os.File is copy_file_range. Moving the
		// offset disturbs no one: every other read of this handle is a ReadAt.
		if _, err := b.f.Seek(off, io.SeekStart); err != nil {
			return 0, err
		}
		return f.ReadFrom(io.LimitReader(b.f, n))
	}
	return io.Copy(dst, io.NewSectionReader(b.f, off, n))
}

type mappedBlob struct {
	data  []byte
	unmap func() error
}

func (b *mappedBlob) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("cas: negative offset")
	}
	if off >= int64(len(b.data)) {
		return 0, io.EOF
	}
	n := copy(p, b.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (b *mappedBlob) Size() int64 { return int64(len(b.data)) }

func (b *mappedBlob) Close() error {
	if b.unmap == nil {
		return nil
	}
	err := b.unmap()
	b.unmap, b.data = nil, nil
	return err
}
