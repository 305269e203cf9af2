package download

import (
	"context"
	"strings"
	"testing"
)

// Pieces an earlier fill kept beyond the blob's start (none from byte 0) that turn out damaged
// make the fill start over once, as damaged kept bytes from the start do: the server sent good
// bytes, and the kept ones are not its fault.
func TestFillRestartsForDamagedKeptPieces(t *testing.T) {
	data, d := blob(4 << 20)
	store := newStore(t)
	w := ingest(t, store, d, int64(len(data)))
	w.SetValidator(`"a"`)
	p, err := w.Parts(int64(len(data)), false)
	if err != nil {
		t.Fatal(err)
	}
	piece := append([]byte(nil), data[2<<20:3<<20]...)
	piece[100] ^= 1
	if _, err := p.WriteAt(piece, 2<<20); err != nil {
		t.Fatal(err)
	}
	w.Keep()
	w.Close()

	w = ingest(t, store, d, int64(len(data)))
	defer w.Close()
	if rs, ok := w.Resumed(); !ok || rs.Offset != 0 || rs.Held != 1<<20 {
		t.Fatalf("resumed %+v, %v: the test wants a kept piece beyond the start only", rs, ok)
	}
	f := New(w, d, int64(len(data)), "mem", Options{Connections: 4, ParallelMin: 1 << 20, Chunk: 512 << 10}, nil)
	r := &memRanger{data: data, etag: `"a"`}
	if err := f.Fill(context.Background(), r); err != nil {
		t.Fatalf("fill over a damaged kept piece: %v, want it to start over", err)
	}
	if w.Digest() != d {
		t.Fatalf("the ingest hashes to %s, want %s", w.Digest(), d)
	}
	if notes := strings.Join(f.Transfer().Notes, "; "); !strings.Contains(notes, "did not hash") {
		t.Fatalf("notes %q, want the restart said", notes)
	}
}
