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

var streamReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, StreamBuffer) }}

// NewStreamReader returns a buffered reader of r and the function that gives it back; the reader
// must not be used after that.
func NewStreamReader(r io.Reader) (*bufio.Reader, func()) {
	br := streamReaders.Get().(*bufio.Reader)
	br.Reset(r)
	return br, func() {
		br.Reset(nil)
		streamReaders.Put(br)
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
