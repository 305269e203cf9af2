package cas

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/internal/errs"
)

func ingestPattern(t *testing.T, s *Store, seed uint64, size int64) (digest.Digest, []byte) {
	t.Helper()
	data := patternBytes(seed, size)
	d, err := s.Ingest(ctx, bytes.NewReader(data), size, "")
	if err != nil {
		t.Fatal(err)
	}
	return d, data
}

// The stream gives the blob from its first byte, and the ReaderAt any offset of it, in the same
// call; what inspect returns is the answer for a blob that hashes right.
func TestVerifyReadSeesTheBlob(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	d, data := ingestPattern(t, s, 1, 3<<20+17)
	found := errors.New("what inspect found")
	err := s.VerifyRead(ctx, d, func(blob ReaderAt, stream io.Reader) error {
		tail := make([]byte, 100)
		if _, err := blob.ReadAt(tail, blob.Size()-100); err != nil || !bytes.Equal(tail, data[len(data)-100:]) || blob.Size() != int64(len(data)) {
			t.Errorf("ReadAt of the tail: %v", err)
		}
		got, err := io.ReadAll(stream)
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("the stream gave %d bytes (%v), not the blob's %d", len(got), err, len(data))
		}
		return found
	})
	if err != found {
		t.Fatalf("VerifyRead = %v, want inspect's error", err)
	}
}

// What inspect leaves unread is hashed all the same: damage past where it stopped is found.
func TestVerifyReadHashesWhatInspectLeaves(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	d, data := ingestPattern(t, s, 2, 2<<20)
	corrupt(t, s, d, int64(len(data)-1))
	err := s.VerifyRead(ctx, d, func(blob ReaderAt, stream io.Reader) error {
		_, err := io.ReadFull(stream, make([]byte, 1000))
		return err
	})
	if !errors.Is(err, errs.Integrity) || !strings.Contains(err.Error(), "hashes to") {
		t.Fatalf("VerifyRead of a blob damaged at its end = %v, want integrity", err)
	}
	if s.Has(d) || len(dirNames(t, filepath.Join(s.Root(), "quarantine"))) != 1 {
		t.Fatal("the damaged blob was not moved to quarantine")
	}
}

// A damaged blob is an integrity error whatever inspect made of its bytes: that they are not an
// archive says nothing of the pinned ones, which the next pull fetches again.
func TestVerifyReadDamageWinsOverInspect(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	d, _ := ingestPattern(t, s, 3, 1<<20)
	corrupt(t, s, d, 10)
	err := s.VerifyRead(ctx, d, func(ReaderAt, io.Reader) error {
		return errs.New(errs.InvalidArtifact, "not a zip")
	})
	if !errors.Is(err, errs.Integrity) || errors.Is(err, errs.InvalidArtifact) {
		t.Fatalf("VerifyRead = %v, want integrity only", err)
	}
}

// A read that fails is that failure, never what inspect made of a short stream, and a missing
// blob is not-found.
func TestVerifyReadFailures(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	if err := s.VerifyRead(ctx, digest.FromString("absent"), func(ReaderAt, io.Reader) error { return nil }); !errors.Is(err, errs.NotFound) {
		t.Fatalf("VerifyRead of a missing blob = %v", err)
	}
	d, _ := ingestPattern(t, s, 4, 1<<20)
	cctx, cancel := context.WithCancel(ctx)
	err := s.VerifyRead(cctx, d, func(_ ReaderAt, stream io.Reader) error {
		cancel()
		_, err := io.ReadAll(stream)
		return errs.Wrap(err, errs.InvalidArtifact, "cut short")
	})
	if !errors.Is(err, context.Canceled) || errors.Is(err, errs.InvalidArtifact) {
		t.Fatalf("VerifyRead cancelled = %v", err)
	}
	if !s.Has(d) {
		t.Fatal("a cancelled verify moved a good blob")
	}
	// A blob that is a folder can be opened but not read.
	p := s.Path(digest.FromString("a folder"))
	if err := os.Mkdir(p, 0o700); err != nil {
		t.Fatal(err)
	}
	err = s.VerifyRead(ctx, digest.FromString("a folder"), func(_ ReaderAt, stream io.Reader) error {
		_, err := io.ReadAll(stream)
		return errs.Wrap(err, errs.InvalidArtifact, "cut short")
	})
	if err == nil || errors.Is(err, errs.InvalidArtifact) || errors.Is(err, errs.Integrity) {
		t.Fatalf("VerifyRead of an unreadable blob = %v, want the read's failure", err)
	}
}
