package cas

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/internal/atomicfile"
)

// writeCalls is how many write system calls this process has made, from /proc/self/io.
func writeCalls(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Skipf("no write count here: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "syscw: "); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Skip("no syscw in /proc/self/io")
	return 0
}

// An ingest hands the kernel its chunks atomicfile.WriteChunk bytes at a time, whether it is
// written in order or at offsets: a write of a whole chunk costs several times the CPU per byte
// in the kernel (see atomicfile.WriteChunk).
func TestIngestWritesInSmallCalls(t *testing.T) {
	const size = 4 << 20
	want := size / atomicfile.WriteChunk
	s := openStore(t)
	before := writeCalls(t)
	if _, err := s.Ingest(ctx, newPattern(3, size), size, ""); err != nil {
		t.Fatal(err)
	}
	if calls := writeCalls(t) - before; calls < want {
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
	before = writeCalls(t)
	if _, err := p.WriteAt(data[size/2:], size/2); err != nil {
		t.Fatal(err)
	}
	if calls := writeCalls(t) - before; calls < want/2 {
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
