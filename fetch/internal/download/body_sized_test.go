package download

import (
	"bytes"
	"io"
	"testing"
)

// capTaker records the capacity of each buffer the read-ahead hands it.
type capTaker struct{ caps []int }

func (c *capTaker) WriteBuffer(p *[]byte, n int) (*[]byte, error) {
	c.caps = append(c.caps, cap(*p))
	return p, nil
}

func (c *capTaker) Write(p []byte) (int, error) { return len(p), nil }

// A body whose length is announced is read ahead into a buffer no larger than it (rounded up to
// a power of two from 4 KiB): a pull of many small blobs takes a few KiB for each in flight. One
// of unknown length takes a whole read-ahead chunk.
func TestBodyReadsASmallBlobIntoASmallBuffer(t *testing.T) {
	data := bytes.Repeat([]byte("b"), 2000)
	for _, c := range []struct {
		want int64
		cap  int
	}{{int64(len(data)), 4 << 10}, {-1, readAheadChunk}} {
		dst := &capTaker{}
		if _, err := CopyBounded(dst, NewBody(io.NopCloser(bytes.NewReader(data)), c.want, "blob x", nil), int64(len(data))); err != nil {
			t.Fatal(err)
		}
		if len(dst.caps) != 1 || dst.caps[0] != c.cap {
			t.Errorf("a body of %d bytes announced as %d was read into buffers of %v; want one of %d", len(data), c.want, dst.caps, c.cap)
		}
	}
}
