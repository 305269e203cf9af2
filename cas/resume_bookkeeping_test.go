package cas

import (
	"os"
	"path/filepath"
	"testing"
)

// keptParts leaves a kept ingest of data that holds the given spans, written at offsets.
func keptParts(t *testing.T, s *Store, data []byte, spans ...Span) ResumeInfo {
	t.Helper()
	info := resumeInfo(data)
	w, err := s.OpenResumable(ctx, info)
	if err != nil {
		t.Fatal(err)
	}
	p, err := w.Parts(info.Size, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, sp := range spans {
		if _, err := p.WriteAt(data[sp.Start:sp.End], sp.Start); err != nil {
			t.Fatal(err)
		}
	}
	w.Keep()
	must(t, w.Close())
	return info
}

// finish writes what a resumed ingest lacks and commits it: the blob must come out right.
func finish(t *testing.T, s *Store, info ResumeInfo, data []byte) {
	t.Helper()
	w, err := s.OpenResumable(ctx, info)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	p, err := w.Parts(info.Size, false)
	if err != nil {
		t.Fatal(err)
	}
	fillAndCommit(t, w, p, data, info, "the resume's bookkeeping lost or invented bytes")
}

// A resumed ingest whose kept bytes start after byte 0 hashes nothing until the first byte is in:
// the in-order hash never runs past a missing first byte (issue 22, item 15).
func TestResumeHashWaitsForAMissingFirstByte(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	data := patternBytes(51, 3<<20)
	data[0] = 0xff // a hole reads as zero: the hash of one would differ
	info := keptParts(t, s, data, Span{1, 2 << 20})
	w, err := s.OpenResumable(ctx, info)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if r, ok := w.Resumed(); !ok || r.Offset != 0 || r.Held != 2<<20-1 {
		t.Fatalf("resumed %+v, %v", r, ok)
	}
	p, err := w.Parts(info.Size, false)
	if err != nil {
		t.Fatal(err)
	}
	// Wake the hasher three times: the third send returns only once it has taken the second,
	// so it has looked at what is held at least once with byte 0 still missing.
	for range 3 {
		p.wake <- struct{}{}
	}
	fillAndCommit(t, w, p, data, info, "the hash ran past the missing first byte")
}

// Two kept ranges one byte apart stay two: the byte between them is fetched, not assumed.
func TestResumeKeepsRangesAByteApartApart(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	data := patternBytes(52, 1<<20)
	info := keptParts(t, s, data, Span{0, 1000}, Span{1001, 5000})
	rec, _ := readRecord(t, s, info.Digest)
	if len(rec.Have) != 2 || rec.Have[0] != (Span{0, 1000}) || rec.Have[1] != (Span{1001, 5000}) {
		t.Fatalf("record holds %+v, want the two ranges apart", rec.Have)
	}
	w, err := s.OpenResumable(ctx, info)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := w.Parts(info.Size, false)
	if m := p.Missing(); len(m) != 2 || m[0] != (Span{1000, 1001}) {
		t.Fatalf("missing %v, want byte 1000 first", m)
	}
	w.Keep()
	must(t, w.Close())
	finish(t, s, info, data)
}

// A record that claims more than its file holds (the file lost its end: a power cut, a disk
// full, someone's truncate) is believed only as far as the file goes.
func TestResumeBelievesARecordOnlyAsFarAsItsFile(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	data := patternBytes(53, 4<<20)
	info := keptParts(t, s, data, Span{0, 1 << 20}, Span{2 << 20, 3 << 20})
	file := filepath.Join(s.Root(), "ingest", "resume-"+info.Digest.Encoded())
	must(t, os.Truncate(file, 2<<20+4096))
	w, err := s.OpenResumable(ctx, info)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := w.Resumed(); !ok || r.Offset != 1<<20 || r.Held != 1<<20+4096 {
		t.Fatalf("resumed %+v, %v: want only what the file still holds", r, ok)
	}
	w.Keep()
	must(t, w.Close())
	finish(t, s, info, data)
}

// fillAndCommit writes every missing span of data, waits for the hash, and commits: the commit
// fails, with why, unless what was kept and what was written make exactly data.
func fillAndCommit(t *testing.T, w *Writer, p *Parts, data []byte, info ResumeInfo, why string) {
	t.Helper()
	for _, m := range p.Missing() {
		if _, err := p.WriteAt(data[m.Start:m.End], m.Start); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if d, err := w.Commit(ctx, info.Size, info.Digest); err != nil || d != info.Digest {
		t.Fatalf("Commit = %s, %v: %s", d, err, why)
	}
}
