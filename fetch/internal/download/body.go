package download

import (
	"errors"
	"io"
	"net/url"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/internal/bufpool"
	"github.com/murmur-nexus/mur/internal/errs"
)

// Body is an answer's body held to the length its server announced: one that ends early ends with
// an errs.Network error wrapping io.ErrUnexpectedEOF, one that runs past it with errs.Integrity.
// io.Copy reads it ahead (WriteTo).
type Body struct {
	body     io.ReadCloser
	want     int64 // the length announced, or -1
	got      int64
	what     string
	classify func(error) error
}

// NewBody holds rc to want bytes (-1: unknown). what names the download in errors; classify, when
// not nil, words a read failure other than an early end.
func NewBody(rc io.ReadCloser, want int64, what string, classify func(error) error) *Body {
	return &Body{body: rc, want: want, what: what, classify: classify}
}

func (b *Body) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	b.got += int64(n)
	if b.want >= 0 && b.got > b.want {
		return n, errs.New(errs.Integrity, "%s: the server sent more than the %d bytes it announced", b.what, b.want)
	}
	switch {
	case err == io.EOF:
		if b.want >= 0 && b.got != b.want {
			return n, errs.Wrap(io.ErrUnexpectedEOF, errs.Network, "the download of %s broke off after %d of %d bytes; try again", b.what, b.got, b.want)
		}
		return n, io.EOF
	case err == nil:
		return n, nil
	case errors.Is(err, io.ErrUnexpectedEOF):
		return n, errs.Wrap(err, errs.Network, "the download of %s broke off after %d of %d bytes; try again", b.what, b.got, b.want)
	case b.classify != nil:
		return n, b.classify(err)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return n, errs.Wrap(err, errs.Network, "the download of %s broke off after %d bytes: %v", b.what, b.got, err)
}

func (b *Body) Close() error { return b.body.Close() }

// Read-ahead of WriteTo: while the consumer hashes and writes one chunk, the next arrives.
const (
	readAheadChunk  = cas.ChunkSize // so that the ingest takes each buffer whole (WriteBuffer)
	readAheadChunks = 4
)

// WriteTo is what io.Copy uses. It reads ahead in a goroutine, so that receiving the blob
// overlaps with the caller's hashing and writing instead of alternating with it; on a cold pull
// those are the two costs that matter, and they sit on different cores. Memory stays at
// readAheadChunks × readAheadChunk whatever the blob's size, and at one buffer the size of the
// blob (rounded up to a power of two) for a blob smaller than readAheadChunk.
//
// The buffers are bufpool's, whose memory nothing else reclaims, so every one goes back on every
// path. The reading goroutine gives them back once WriteTo has returned: on a failure it may
// still be blocked in a Read into one, and WriteTo must not wait for a stalled connection.
func (b *Body) WriteTo(w io.Writer) (int64, error) {
	type chunk struct {
		buf []byte
		n   int
		err error
	}
	// Every buffer is held by the reader, queued in full, held by WriteTo, or in free; free has
	// room for all of them, so giving one back never blocks.
	full := make(chan chunk, readAheadChunks-1)
	free := make(chan []byte, readAheadChunks)
	done := make(chan struct{})
	defer close(done)
	go func() {
		var held []byte
		defer func() {
			<-done // WriteTo has returned: nothing but this goroutine touches a buffer now
			if held != nil {
				bufpool.Put(&held)
			}
			close(full)
			for c := range full {
				bufpool.Put(&c.buf)
			}
			for len(free) > 0 {
				b := <-free
				bufpool.Put(&b)
			}
		}()
		// Buffers are lent by bufpool as the read-ahead needs them: a small blob is read whole
		// into one no larger than it (bufpool.Class), which the next blob of the pull reuses
		// instead of clearing a fresh one.
		size := readAheadChunk
		if b.want >= 0 {
			size = bufpool.Class(b.want-b.got, readAheadChunk)
		}
		made := 0
		for {
			select {
			case held = <-free:
			default:
				if made < readAheadChunks {
					made++
					held = *bufpool.Get(size)
					break
				}
				select {
				case held = <-free:
				case <-done:
					return
				}
			}
			n, err := 0, error(nil)
			for n < len(held) && err == nil {
				var m int
				m, err = b.Read(held[n:])
				n += m
			}
			select {
			case full <- chunk{held, n, err}:
				held = nil
			case <-done:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	var total int64
	bw, _ := w.(bufferWriter)
	for {
		c := <-full
		var werr error
		if c.n > 0 && bw != nil {
			// The writer takes the buffer itself and gives one back: no copy.
			nb, err := bw.WriteBuffer(&c.buf, c.n)
			c.buf, werr = *nb, err
			if werr == nil {
				total += int64(c.n)
			}
		} else if c.n > 0 {
			wn, err := w.Write(c.buf[:c.n])
			total += int64(wn)
			if werr = err; werr == nil && wn != c.n {
				werr = io.ErrShortWrite
			}
		}
		free <- c.buf
		switch {
		case werr != nil:
			return total, werr
		case c.err == io.EOF:
			return total, nil
		case c.err != nil:
			return total, c.err
		}
	}
}

// bufferWriter takes a filled buffer of bufpool's as a whole, in exchange for another of the same
// size (cas.Writer.WriteBuffer), sparing a copy of every byte received.
type bufferWriter interface {
	WriteBuffer(b *[]byte, n int) (*[]byte, error)
}

// ErrTooLong is the error of a copy that got more bytes than it was bounded to.
var ErrTooLong = errors.New("more bytes than declared")

// CopyBounded copies src to dst and fails with ErrTooLong as soon as src yields more than limit
// bytes (a negative limit is no bound): a body longer than its manifest or index declares is
// stopped at the first byte too many, whether it is chunked and endless or lies in its
// Content-Length. A src that writes itself (a Body reads ahead in a goroutine) keeps doing so.
func CopyBounded(dst io.Writer, src io.Reader, limit int64) (int64, error) {
	if limit < 0 {
		return io.Copy(dst, src)
	}
	lw := &limitedWriter{w: dst, left: limit}
	if wt, ok := src.(io.WriterTo); ok {
		return wt.WriteTo(lw)
	}
	return io.Copy(lw, src)
}

type limitedWriter struct {
	w    io.Writer
	left int64
}

func (l *limitedWriter) WriteBuffer(b *[]byte, n int) (*[]byte, error) {
	bw, ok := l.w.(bufferWriter)
	if !ok || int64(n) > l.left {
		_, err := l.Write((*b)[:n])
		return b, err
	}
	nb, err := bw.WriteBuffer(b, n)
	if err == nil {
		l.left -= int64(n)
	}
	return nb, err
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if int64(len(p)) <= l.left {
		n, err := l.w.Write(p)
		l.left -= int64(n)
		return n, err
	}
	n, err := l.w.Write(p[:l.left])
	l.left -= int64(n)
	if err == nil {
		err = ErrTooLong
	}
	return n, err
}

// Progress is a writer that counts what passes through it and reports the count on its first
// write and every MiB after.
type Progress struct {
	W      io.Writer
	Report func(n int64)
	n      int64
	last   int64
}

func (pw *Progress) Write(b []byte) (int, error) {
	n, err := pw.W.Write(b)
	first := pw.n == 0
	pw.n += int64(n)
	if first || pw.n-pw.last >= 1<<20 {
		pw.last = pw.n
		if pw.Report != nil {
			pw.Report(pw.n)
		}
	}
	return n, err
}

// Stream copies one answer of size bytes (-1: unknown) from src to dst, bounded by size, reporting
// progress: the download of a server that serves no ranges.
func Stream(dst io.Writer, src io.Reader, size int64, progress func(n int64)) (int64, error) {
	return CopyBounded(&Progress{W: dst, Report: progress}, src, size)
}
