package cas

import (
	"context"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/internal/bufpool"
)

// A writer told its blob's size takes chunks no larger than the blob: a blob of 2,000 bytes
// takes one of 4 KiB from the heap's pools, not a megabyte of bufpool's slabs; one whose size is
// not known takes a whole chunk. Not parallel: it counts the process's lent buffers.
func TestWriterChunksAreSizedToTheBlob(t *testing.T) {
	s := openStore(t)
	blob := make([]byte, 2000)
	for _, c := range []struct {
		expect int64
		lent   int64
	}{{int64(len(blob)), 0}, {-1, chunkSize}} {
		w, err := s.NewWriter(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		w.Expect(c.expect)
		base := bufpool.LentBytes()
		if _, err := w.Write(blob); err != nil {
			t.Fatal(err)
		}
		if got := bufpool.LentBytes() - base; got != c.lent {
			t.Errorf("a writer expecting %d bytes lent %d bytes of buffers for %d; want %d", c.expect, got, len(blob), c.lent)
		}
		if cap(w.cur.buf) > chunkSize || c.expect > 0 && cap(w.cur.buf) != 4<<10 {
			t.Errorf("a writer expecting %d bytes took a chunk of %d", c.expect, cap(w.cur.buf))
		}
		if _, err := w.Commit(context.Background(), int64(len(blob)), digest.FromBytes(blob)); err != nil {
			t.Fatal(err)
		}
	}
}
