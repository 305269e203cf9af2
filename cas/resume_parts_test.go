package cas

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/murmur-nexus/mur/internal/errs"
)

func TestPartsAtOffsetsInAnyOrder(t *testing.T) {
	t.Parallel()
	for _, hashLast := range []bool{false, true} {
		s := openStore(t)
		data := patternBytes(31, 10<<20+3)
		info := resumeInfo(data)
		w, _ := s.OpenResumable(ctx, info)
		w.Write(data[:1<<20])
		p, err := w.Parts(info.Size, hashLast)
		if err != nil {
			t.Fatal(err)
		}
		if m := p.Missing(); len(m) != 1 || m[0] != (Span{1 << 20, info.Size}) {
			t.Fatalf("missing %v", m)
		}
		fi, _ := os.Stat(filepath.Join(s.Root(), "ingest", "resume-"+info.Digest.Encoded()))
		if fi.Size() != info.Size {
			t.Fatalf("the file is %d bytes, want it grown to %d", fi.Size(), info.Size)
		}
		const piece = 700_000
		var offs []int64
		for off := int64(1 << 20); off < info.Size; off += piece {
			offs = append(offs, off)
		}
		var wg sync.WaitGroup
		for i := len(offs) - 1; i >= 0; i-- { // back to front, four at a time
			off := offs[i]
			wg.Add(1)
			go func() {
				defer wg.Done()
				end := min(off+piece, info.Size)
				if _, err := p.WriteAt(data[off:end], off); err != nil {
					t.Error(err)
				}
			}()
			if i%4 == 0 {
				wg.Wait()
			}
		}
		wg.Wait()
		if _, err := p.WriteAt([]byte("xx"), info.Size-1); !errors.Is(err, errs.Integrity) {
			t.Fatalf("bytes past the end: %v", err)
		}
		if err := p.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		if w.Size() != info.Size || w.Digest() != info.Digest {
			t.Fatalf("hashLast %v: size %d digest %s", hashLast, w.Size(), w.Digest())
		}
		if _, err := w.Commit(ctx, info.Size, info.Digest); err != nil {
			t.Fatal(err)
		}
	}
}

func TestPartsKeptAndContinued(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	data := patternBytes(32, 4<<20)
	info := resumeInfo(data)
	w, _ := s.OpenResumable(ctx, info)
	p, _ := w.Parts(info.Size, false)
	p.WriteAt(data[:1<<20], 0)
	p.WriteAt(data[2<<20:3<<20], 2<<20)
	w.Keep()
	w.Close()
	rec, _ := readRecord(t, s, info.Digest)
	if len(rec.Have) != 2 || rec.Have[0] != (Span{0, 1 << 20}) || rec.Have[1] != (Span{2 << 20, 3 << 20}) {
		t.Fatalf("record holds %+v", rec.Have)
	}

	w, _ = s.OpenResumable(ctx, info)
	r, ok := w.Resumed()
	if !ok || r.Offset != 1<<20 || r.Held != 2<<20 {
		t.Fatalf("resumed %+v", r)
	}
	p, _ = w.Parts(info.Size, false)
	if m := p.Missing(); len(m) != 2 || m[0] != (Span{1 << 20, 2 << 20}) || m[1] != (Span{3 << 20, 4 << 20}) {
		t.Fatalf("missing %v", m)
	}
	fillAndCommit(t, w, p, data, info, "the resumed spans did not make the blob")
}

// A resumed ingest written at offsets and continued from its start drops what it held beyond
// its prefix, then appends.
func TestPartsContinuedSequentially(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	data := patternBytes(33, 4<<20)
	info := resumeInfo(data)
	w, _ := s.OpenResumable(ctx, info)
	p, _ := w.Parts(info.Size, false)
	p.WriteAt(data[:1<<20], 0)
	p.WriteAt(data[3<<20:], 3<<20)
	w.Keep()
	w.Close()
	w, _ = s.OpenResumable(ctx, info)
	if w.Size() != 1<<20 {
		t.Fatalf("continued at %d", w.Size())
	}
	w.Write(data[1<<20:])
	if d, err := w.Commit(ctx, info.Size, info.Digest); err != nil || d != info.Digest {
		t.Fatalf("Commit = %s, %v", d, err)
	}
}

func TestPartsCommitBeforeTheEndFails(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	data := patternBytes(34, 2<<20)
	info := resumeInfo(data)
	w, _ := s.OpenResumable(ctx, info)
	p, _ := w.Parts(info.Size, false)
	p.WriteAt(data[:1<<20], 0)
	if _, err := w.Commit(ctx, info.Size, info.Digest); err == nil {
		t.Fatal("a blob with a hole committed")
	}
	if s.Has(info.Digest) {
		t.Fatal("a blob with a hole is visible")
	}
}
