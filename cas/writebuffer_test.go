package cas

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/internal/bufpool"
)

// A whole chunk's buffer becomes the ingest's chunk (the caller gets another back); anything
// else is copied and handed back. Mixed with plain writes, the blob is exactly the bytes given.
func TestWriteBufferTakesWholeBuffersAndCopiesTheRest(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	w, err := s.NewWriter(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var want bytes.Buffer
	fill := func(b []byte, seed byte) {
		for i := range b {
			b[i] = seed + byte(i%251)
		}
	}
	give := func(size, n int, seed byte, taken bool) {
		t.Helper()
		b := bufpool.Get(size)
		fill((*b)[:n], seed)
		want.Write((*b)[:n])
		first := &(*b)[0]
		got, err := w.WriteBuffer(b, n)
		if err != nil {
			t.Fatal(err)
		}
		if cap(*got) != size || len(*got) != size {
			t.Fatalf("got back a buffer of len %d cap %d, want %d", len(*got), cap(*got), size)
		}
		if same := &(*got)[0] == first; same == taken {
			t.Fatalf("WriteBuffer(%d of %d bytes): buffer taken = %v, want %v", n, size, !same, taken)
		}
		// The caller may scribble on what it got back: the blob must not change.
		fill(*got, 0xEE)
		bufpool.Put(got)
	}
	give(ChunkSize, ChunkSize, 1, true)  // a whole chunk, nothing buffered: taken
	give(ChunkSize, 1000, 2, true)       // a short read, nothing buffered: taken, left open
	give(ChunkSize, ChunkSize, 3, false) // 1000 bytes buffered: copied
	give(64<<10, 64<<10, 4, false)       // another size: copied
	if _, err := w.Write([]byte("tail")); err != nil {
		t.Fatal(err)
	}
	want.WriteString("tail")
	give(ChunkSize, ChunkSize/2, 5, false) // a partial chunk is pending: copied
	d := digest.FromBytes(want.Bytes())
	if w.Digest() != d || w.Size() != int64(want.Len()) {
		t.Fatalf("ingest %s (%d bytes), want %s (%d)", w.Digest(), w.Size(), d, want.Len())
	}
	if _, err := w.Commit(context.Background(), int64(want.Len()), d); err != nil {
		t.Fatal(err)
	}
	ra, err := s.ReaderAt(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	defer ra.Close()
	got, _ := io.ReadAll(io.NewSectionReader(ra, 0, int64(want.Len())))
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatal("the committed blob is not the bytes given")
	}
}

// A flushed ingest (read back to be checked, as a pull does while it waits for the payload's
// check) gives its chunk buffers back at once, and takes new ones if written again. Not parallel:
// it counts the buffers lent to the whole process, which every other ingest moves.
func TestFlushedIngestGivesItsChunksBack(t *testing.T) {
	s := openStore(t)
	base := bufpool.Lent()
	w, err := s.NewWriter(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	data := bytes.Repeat([]byte("c"), 3*ChunkSize+5)
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if bufpool.Lent() == base {
		t.Fatal("writing took no chunk buffers")
	}
	r, err := w.OpenRead()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if n := bufpool.Lent() - base; n != 0 {
		t.Fatalf("a flushed ingest still holds %d chunk buffers", n)
	}
	if _, err := w.Write([]byte("more")); err != nil {
		t.Fatal(err)
	}
	data = append(data, "more"...)
	if d := digest.FromBytes(data); w.Digest() != d {
		t.Fatalf("ingest %s, want %s", w.Digest(), d)
	}
}
