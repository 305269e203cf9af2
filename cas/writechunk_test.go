package cas

import (
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/internal/atomicfile"
	"github.com/murmur-nexus/mur/internal/atomicfile/atomicfiletest"
)

// An ingest hands the kernel its chunks atomicfile.WriteChunk bytes at a time, whether it is
// written in order or at offsets: a write of a whole chunk costs several times the CPU per byte
// in the kernel (see atomicfile.WriteChunk).
func TestIngestWritesInSmallCalls(t *testing.T) {
	t.Parallel()
	const size = 4 << 20
	want := size / atomicfile.WriteChunk
	s := openStore(t)
	before := atomicfiletest.WriteCalls(t)
	if _, err := s.Ingest(ctx, newPattern(3, size), size, ""); err != nil {
		t.Fatal(err)
	}
	if calls := atomicfiletest.WriteCalls(t) - before; calls < want {
		t.Errorf("an ingest of %d bytes made %d write calls, want at least %d", size, calls, want)
	}

	w, err := s.NewWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	p, err := w.Parts(size, false)
	if err != nil {
		t.Fatal(err)
	}
	data := patternBytes(4, size)
	before = atomicfiletest.WriteCalls(t)
	if _, err := p.WriteAt(data[size/2:], size/2); err != nil {
		t.Fatal(err)
	}
	if calls := atomicfiletest.WriteCalls(t) - before; calls < want/2 {
		t.Errorf("a write of %d bytes at an offset made %d write calls, want at least %d", size/2, calls, want/2)
	}
	if _, err := p.WriteAt(data[:size/2], 0); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(ctx, size, digest.FromBytes(data)); err != nil {
		t.Fatal(err)
	}
}

// An ingest's pace is unknown until both stages took bytes, then the bytes a second they went at.
func TestIngestPace(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	w, err := s.NewWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if p := w.Pace(); p != 0 {
		t.Fatalf("an ingest that took nothing has pace %v", p)
	}
	w.Write(patternBytes(5, 3<<20))
	w.Digest() // waits for both stages
	if p := w.Pace(); p <= 0 {
		t.Fatalf("an ingest that took 3 MiB has pace %v", p)
	}
}
