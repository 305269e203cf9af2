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

// Good pieces an earlier fill kept beyond the start count as resumed, all of them: the number a
// stopped pull called kept is the one the next pull resumes with, its progress starts from, and
// its transfer leaves out.
func TestFillResumesEveryKeptPiece(t *testing.T) {
	data, d := blob(4 << 20)
	store := newStore(t)
	w := ingest(t, store, d, int64(len(data)))
	w.SetValidator(`"a"`)
	p, err := w.Parts(int64(len(data)), false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.WriteAt(data[2<<20:3<<20], 2<<20); err != nil {
		t.Fatal(err)
	}
	held := w.Held()
	w.Keep()
	w.Close()

	w = ingest(t, store, d, int64(len(data)))
	defer w.Close()
	if rs, ok := w.Resumed(); !ok || rs.Offset != 0 || rs.Held != held || held != 1<<20 {
		t.Fatalf("resumed %+v, %v: the test wants a kept piece of %d bytes beyond the start only", rs, ok, held)
	}
	var first, last int64 = -1, -1
	f := New(w, d, int64(len(data)), "mem", Options{Connections: 4, ParallelMin: 1 << 20, Chunk: 512 << 10}, func(n int64) {
		if first < 0 {
			first = n
		}
		last = n
	})
	if err := f.Fill(context.Background(), &memRanger{data: data, etag: `"a"`}); err != nil {
		t.Fatal(err)
	}
	x := f.Transfer()
	if x.Resumed != held || x.Bytes != int64(len(data))-held {
		t.Fatalf("resumed %d and received %d bytes, want %d kept and the other %d", x.Resumed, x.Bytes, held, int64(len(data))-held)
	}
	if first <= held || last != int64(len(data)) {
		t.Fatalf("progress went from %d to %d, want it past the %d kept bytes from the first report, and to %d", first, last, held, len(data))
	}
}
