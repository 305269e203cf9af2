package stage

import (
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/internal/artifact"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
)

func (b *Budget) usedNow() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// A budget reserves a staged folder's payload before a byte of it is written, refuses what
// does not fit in words that name the bound and both ways to raise it, and takes back what a
// discarded folder reserved; an installed one keeps its share.
func TestBudgetReservesFoldersWhole(t *testing.T) {
	const size = 2 << 20
	wasm := artifacttest.Padded("tool", size)
	blob := artifacttest.Spec{Name: "tool", Version: "1.0.0", Wasm: wasm, Compression: artifact.Zstd}.Zip()
	a := readArchive(t, blob)
	b := NewBudget(3 << 20)
	tools := Tools{Project: t.TempDir(), Budget: b}
	first, err := Prepare(tools, streamName, digest.FromBytes(blob), a, blobReader(blob), nil)
	if err != nil || b.usedNow() != a.PayloadSize {
		t.Fatalf("Prepare: %v; the budget holds %d, want the payload's %d", err, b.usedNow(), a.PayloadSize)
	}
	_, err = Prepare(tools, streamName, digest.FromBytes(blob), a, blobReader(blob), nil)
	errtest.WantToken(t, err, errs.InvalidArtifact, "acme/tool decompresses to 2.0 MiB", "over the 3.0 MiB one pull may stage", "pull.max_decompressed", EnvMaxPullDecompressed)
	first.Discard()
	if b.usedNow() != 0 {
		t.Fatalf("a discarded folder left %d bytes reserved", b.usedNow())
	}
	st, err := Prepare(tools, streamName, digest.FromBytes(blob), a, blobReader(blob), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Install(); err != nil {
		t.Fatal(err)
	}
	st.Discard()
	if b.usedNow() != a.PayloadSize {
		t.Fatalf("an installed folder holds %d of the budget, want %d", b.usedNow(), a.PayloadSize)
	}
}

// A stream that decompresses a payload as it downloads writes no more of it than the pull may
// still stage: past that it stops, and gives back what it took. One that fits hands its share
// to the folder it is adopted into, which gives it back when discarded.
func TestStreamStopsAtTheBudget(t *testing.T) {
	const size = 4 << 20
	wasm := artifacttest.Padded("tool", size)
	blob := artifacttest.Spec{Name: "tool", Version: "1.0.0", Wasm: wasm, Compression: artifact.Zstd}.Zip()

	b := NewBudget(1 << 20)
	tools := Tools{Project: t.TempDir(), Budget: b}
	s := NewStream(&tools, streamName, digest.FromBytes(blob), nil)
	feed(s, blob, 0)
	if r := s.finish(); r.ok {
		t.Fatal("the stream staged a payload over the budget")
	}
	fi, err := s.file.Stat()
	if err != nil || fi.Size() > 1<<20 || s.charged.n != fi.Size() {
		t.Fatalf("the unnamed file holds %d bytes (%v), %d charged; want at most the 1 MiB budget", fi.Size(), err, s.charged.n)
	}
	s.abandon()
	if b.usedNow() != 0 {
		t.Errorf("an abandoned stream left %d bytes reserved", b.usedNow())
	}

	b = NewBudget(8 << 20)
	tools = Tools{Project: t.TempDir(), Budget: b}
	s = NewStream(&tools, streamName, digest.FromBytes(blob), nil)
	feed(s, blob, 0)
	st := s.Adopt(readArchive(t, blob), int64(len(blob)))
	if st == nil || b.usedNow() != int64(len(wasm)) {
		t.Fatalf("adopted %v, the budget holds %d; want the folder holding the payload's %d", st != nil, b.usedNow(), len(wasm))
	}
	st.Discard()
	if b.usedNow() != 0 {
		t.Errorf("%d left reserved once the folder was discarded", b.usedNow())
	}
}
