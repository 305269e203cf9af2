package artifact

import (
	"bufio"
	"io"
	"sync"

	"github.com/klauspost/compress/flate"
)

// Buffers and decompressors are reused across the entries and artifacts of one process. On a
// virtual machine the page faults of a fresh buffer cost more than the bytes read through it,
// and a project pull or a verify makes one per artifact.

// StreamBuffer is the read size of the streaming checks: small enough that a chunk is still in
// the CPU's cache when the hash, the inflate and the CRC-32 pass over it, one after another.
const StreamBuffer = 128 << 10

// streamReaders pool the buffered readers by size: StreamBuffer, and each power of two below it
// down to minStreamBuffer, for streams that are smaller (a pull of many small artifacts follows
// dozens at once).
var streamReaders [streamClasses]sync.Pool

const (
	minStreamBuffer = 4 << 10
	streamClasses   = 6 // 4 KiB to StreamBuffer
)

func init() {
	for i := range streamReaders {
		size := minStreamBuffer << i
		streamReaders[i].New = func() any { return bufio.NewReaderSize(nil, size) }
	}
}

// NewStreamReader returns a buffered reader of r and the function that gives it back; the reader
// must not be used after that.
func NewStreamReader(r io.Reader) (*bufio.Reader, func()) { return NewStreamReaderFor(r, -1) }

// NewStreamReaderFor is NewStreamReader for a stream of n bytes (-1: not known), whose buffer is
// no larger than the stream rounded up to a power of two.
func NewStreamReaderFor(r io.Reader, n int64) (*bufio.Reader, func()) {
	class := streamClasses - 1
	if n >= 0 {
		class = 0
		for class < streamClasses-1 && int64(minStreamBuffer)<<class < n {
			class++
		}
	}
	pool := &streamReaders[class]
	br := pool.Get().(*bufio.Reader)
	br.Reset(r)
	return br, func() {
		br.Reset(nil)
		pool.Put(br)
	}
}

var inflaters sync.Pool

// pooledInflater gives its decompressor back to the pool on Close.
type pooledInflater struct {
	io.ReadCloser
	closed bool
}

func (p *pooledInflater) Close() error {
	if p.closed {
		return nil
	}
	p.closed = true
	err := p.ReadCloser.Close()
	inflaters.Put(p.ReadCloser)
	return err
}

// NewInflater returns a reader of the deflate stream r, which reads no byte past the stream's
// end when r is an io.ByteReader. Close gives its decompressor back for reuse.
func NewInflater(r io.Reader) io.ReadCloser {
	if fr, ok := inflaters.Get().(io.ReadCloser); ok {
		if err := fr.(flate.Resetter).Reset(r, nil); err == nil {
			return &pooledInflater{ReadCloser: fr}
		}
	}
	return &pooledInflater{ReadCloser: flate.NewReader(r)}
}
