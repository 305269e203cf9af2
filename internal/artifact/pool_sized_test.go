package artifact

import (
	"bytes"
	"testing"
)

// A stream reader is sized to its stream: the power of two from 4 KiB up that holds it, at most
// StreamBuffer, which is also the size when the stream's length is not known; a reader given back
// is lent again at its own size.
func TestStreamReaderIsSizedToTheStream(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want int
	}{{-1, StreamBuffer}, {0, 4 << 10}, {2000, 4 << 10}, {5000, 8 << 10}, {StreamBuffer, StreamBuffer}, {1 << 30, StreamBuffer}} {
		for range 2 {
			br, release := NewStreamReaderFor(bytes.NewReader(nil), c.n)
			if br.Size() != c.want {
				t.Errorf("a reader for %d bytes has a buffer of %d; want %d", c.n, br.Size(), c.want)
			}
			release()
		}
	}
}
