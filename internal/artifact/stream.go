package artifact

import (
	"bufio"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path"
	"sort"
	"sync/atomic"

	"github.com/klauspost/compress/zip"

	"github.com/murmur-nexus/mur/internal/errs"
)

// CheckStream reads the packed file from its first byte, as r gives it in order, and checks
// every file entry on the way: a compressed (deflate or zstd) entry decompresses to no more than
// its zip records (and so within the decompression ceiling) from no more bytes than its zip
// records, and each entry has the size and CRC-32 its central directory records. It reads r
// only up to the end of the last entry's data, so that a caller hashing the same stream (the CAS
// re-hashing a blob) reads the blob once for both. Entries whose data share bytes of the file
// are refused: an archiver never writes them, and they are how a small zip inflates without
// bound. Memory use does not depend on the archive's size.
func (a *Archive) CheckStream(r io.Reader) error {
	entryReads.Add(1)
	spans, err := a.spans()
	if err != nil {
		return err
	}
	cr := &countingReader{r: r}
	br, release := NewStreamReader(cr)
	defer release()
	pos := func() int64 { return cr.n - int64(br.Buffered()) }
	crc := crc32.NewIEEE()
	for _, s := range spans {
		if _, err := br.Discard(int(s.offset - pos())); err != nil {
			return a.truncated(s, err)
		}
		crc.Reset()
		var size int64
		switch m := s.f.Method; {
		case m == zip.Store:
			if size, err = copyStored(crc, br, int64(s.f.CompressedSize64)); err != nil {
				return a.truncated(s, err)
			}
		case Readable(m):
			if size, err = a.decompress(s, br, crc, pos); err != nil {
				return err
			}
		default:
			return invalid("%s uses zip compression method %d; mur reads stored, deflated and zstd (method %d) entries only, so the artifact can't be installed; %s", a.describe(s), m, MethodZstd, reportIt)
		}
		if want := int64(s.f.UncompressedSize64); size != want {
			return invalid("%s is %d bytes, but the zip records %d; the artifact is damaged, so it can't be installed; %s", a.describe(s), size, want, reportIt)
		}
		if got := crc.Sum32(); got != s.f.CRC32 {
			return invalid("%s has checksum crc32:%08x, but the zip records crc32:%08x; the artifact is damaged, so it can't be installed; %s", a.describe(s), got, s.f.CRC32, reportIt)
		}
	}
	return nil
}

// entryReads counts the reads of a packed file's entry data begun (CheckStream, OpenPayload,
// NewDecompressor; not the small manifest Read decodes), so that this package's tests can tell a
// path that decompresses entries from one that only reads the zip's directory, as Read does and
// verify relies on. One atomic add per artifact costs nothing beside its inflate.
var entryReads atomic.Int64

const reportIt = "report it to its publisher"

// decompress feeds w the entry s, compressed, whose data starts at br's next byte, and returns
// its size.
func (a *Archive) decompress(s span, br *bufio.Reader, w io.Writer, pos func() int64) (int64, error) {
	// Read refused any entry that declares more than the ceiling, so decompressing no further
	// than the declared size keeps within it.
	declared := int64(s.f.UncompressedSize64)
	if s.f.Method == MethodZstd && s.f.CompressedSize64 == 0 {
		// No frame at all, which is how zstd encoders write an empty entry. The bytes that
		// follow are the next entry's, not zstd data to refuse.
		return 0, nil
	}
	dec := NewDecompressor(s.f.Method, br, declared) // reads no byte past the entry's data
	defer dec.Close()
	out := &ceilingWriter{w: w, left: declared}
	size, err := io.Copy(out, dec)
	var unsupported *ZstdUnsupported
	switch {
	case out.over:
		verb := map[uint16]string{zip.Deflate: "inflates", MethodZstd: "decodes"}[s.f.Method]
		return 0, invalid("%s %s past the %d bytes its zip records; the artifact is damaged, so it can't be installed; %s", a.describe(s), verb, declared, reportIt)
	case errors.As(err, &unsupported):
		return 0, errs.Wrap(err, errs.InvalidArtifact, "%s can't be read: %v; the artifact can't be installed; %s", a.describe(s), err, RepackZstd)
	case err != nil:
		return 0, errs.Wrap(err, errs.InvalidArtifact, "%s is damaged (%v); the artifact can't be installed, %s", a.describe(s), err, reportIt)
	}
	if used := pos() - s.offset; used > int64(s.f.CompressedSize64) {
		return 0, invalid("%s takes %d bytes of %s stream, but the zip records %d; the artifact is damaged, so it can't be installed; %s", a.describe(s), used, MethodName(s.f.Method), s.f.CompressedSize64, reportIt)
	}
	return size, nil
}

// span is a file entry and where its data starts in the packed file.
type span struct {
	f      *zip.File
	offset int64
}

// spans lists the file entries in the order their data lies in the packed file.
func (a *Archive) spans() ([]span, error) {
	spans := make([]span, 0, len(a.files))
	for _, f := range a.files {
		if isDir(f) {
			continue
		}
		off, err := f.DataOffset()
		if err != nil {
			return nil, errs.Wrap(err, errs.InvalidArtifact, "the local header of entry %q of the packed artifact can't be read (%v); the artifact is damaged, so it can't be installed; %s", f.Name, err, reportIt)
		}
		if off < 0 || off > a.size || int64(f.CompressedSize64) > a.size-off {
			return nil, invalid("the data of entry %q of the packed artifact lies outside the file (%d bytes from %d in a file of %d); the artifact is damaged, so it can't be installed; %s", f.Name, f.CompressedSize64, off, a.size, reportIt)
		}
		spans = append(spans, span{f: f, offset: off})
	}
	sort.SliceStable(spans, func(i, j int) bool { return spans[i].offset < spans[j].offset })
	for i := 1; i < len(spans); i++ {
		prev, cur := spans[i-1], spans[i]
		if cur.offset < prev.offset+int64(prev.f.CompressedSize64) {
			return nil, invalid("entries %q and %q of the packed artifact share bytes of the file; an archiver never writes that (it is how zip bombs are built), so %s", prev.f.Name, cur.f.Name, remedy)
		}
	}
	return spans, nil
}

// describe names an entry in a message: the payload as the payload.
func (a *Archive) describe(s span) string {
	if a.payload == s.f {
		return fmt.Sprintf("the payload %q", a.PayloadName)
	}
	return fmt.Sprintf("entry %q of the packed artifact", path.Clean(s.f.Name))
}

func (a *Archive) truncated(s span, err error) error {
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return errs.Wrap(err, errs.InvalidArtifact, "%s can't be read to its end (%v); the artifact is damaged, so it can't be installed; %s", a.describe(s), err, reportIt)
}

// copyStored feeds n bytes of br to w straight from br's buffer.
func copyStored(w io.Writer, br *bufio.Reader, n int64) (int64, error) {
	var done int64
	for done < n {
		b, err := br.Peek(int(min(n-done, int64(br.Size()))))
		w.Write(b)
		br.Discard(len(b))
		done += int64(len(b))
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

// ceilingWriter passes at most left bytes to w and fails past them.
type ceilingWriter struct {
	w    io.Writer
	left int64
	over bool
}

func (c *ceilingWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > c.left {
		c.over = true
		return 0, io.ErrShortWrite
	}
	c.left -= int64(len(p))
	return c.w.Write(p)
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
