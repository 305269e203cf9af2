package cas

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/internal/errs"
)

func resumeInfo(data []byte) ResumeInfo {
	return ResumeInfo{Digest: digest.FromBytes(data), Size: int64(len(data)), Store: "oci://registry.test/murmur"}
}

func readRecord(t *testing.T, s *Store, d digest.Digest) (ResumeInfo, bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.Root(), "ingest", "resume-"+d.Encoded()+".json"))
	if errors.Is(err, os.ErrNotExist) {
		return ResumeInfo{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	var info ResumeInfo
	if err := json.Unmarshal(b, &info); err != nil {
		t.Fatal(err)
	}
	return info, true
}

func TestResumableContinuesAKeptIngest(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	data := patternBytes(21, 5<<20+17)
	info := resumeInfo(data)
	w, err := s.OpenResumable(ctx, info)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := w.Resumed(); ok || !w.Resumable() {
		t.Fatal("a fresh ingest says it continued one")
	}
	if err := w.SetValidator(`"sha256:abc"`); err != nil {
		t.Fatal(err)
	}
	w.Write(data[:3<<20+5])
	w.Keep()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rec, ok := readRecord(t, s, info.Digest)
	if !ok || rec.Digest != info.Digest || rec.Size != info.Size || rec.Validator != `"sha256:abc"` || rec.Store != info.Store {
		t.Fatalf("record after Keep: %+v (%v)", rec, ok)
	}

	w, err = s.OpenResumable(ctx, info)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := w.Resumed()
	if !ok || r.Offset != 3<<20+5 || r.Held != r.Offset || w.Size() != r.Offset || w.Validator() != `"sha256:abc"` {
		t.Fatalf("resumed %+v %v, size %d, validator %q", r, ok, w.Size(), w.Validator())
	}
	w.Write(data[r.Offset:])
	if d, err := w.Commit(ctx, info.Size, info.Digest); err != nil || d != info.Digest {
		t.Fatalf("Commit = %s, %v", d, err)
	}
	if names := dirNames(t, filepath.Join(s.Root(), "ingest")); len(names) != 0 {
		t.Fatalf("ingest/ holds %v after the commit", names)
	}
	got, _ := os.ReadFile(s.Path(info.Digest))
	if !bytes.Equal(got, data) {
		t.Fatal("the committed blob differs from the data")
	}
}

func TestResumableValidatorBelongsToItsStore(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	data := patternBytes(22, 100_000)
	info := resumeInfo(data)
	w, _ := s.OpenResumable(ctx, info)
	w.SetValidator(`"etag-a"`)
	w.SetValidator(`W/"weak"`) // ignored: a weak ETag can't validate a range
	w.Write(data[:50_000])
	w.Keep()
	w.Close()
	other := info
	other.Store = "oci://mirror.test/murmur"
	w, err := s.OpenResumable(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if r, ok := w.Resumed(); !ok || r.Offset != 50_000 || r.Prev.Validator != `"etag-a"` {
		t.Fatalf("resumed %+v %v", r, ok)
	}
	if w.Validator() != "" {
		t.Fatalf("another store's ETag %q was kept", w.Validator())
	}
}

func TestResumableRecordForAnotherBlobStartsOver(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	data := patternBytes(23, 100_000)
	info := resumeInfo(data)
	w, _ := s.OpenResumable(ctx, info)
	w.Write(data[:60_000])
	w.Keep()
	w.Close()
	// A record that names another size (or is garbage) vouches for nothing.
	meta := filepath.Join(s.Root(), "ingest", "resume-"+info.Digest.Encoded()+".json")
	for _, rec := range []string{`{"digest":"` + info.Digest.String() + `","size":5}`, `not json`} {
		os.WriteFile(meta, []byte(rec), 0o600)
		w, err := s.OpenResumable(ctx, info)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := w.Resumed(); ok || w.Size() != 0 {
			t.Fatalf("record %q: continued from %d bytes", rec, w.Size())
		}
		fi, _ := os.Stat(filepath.Join(s.Root(), "ingest", "resume-"+info.Digest.Encoded()))
		if fi.Size() != 0 {
			t.Fatalf("record %q: the file still holds %d bytes", rec, fi.Size())
		}
		w.Write(data[:60_000])
		w.Keep()
		w.Close()
	}
}

func TestResumableCorruptPrefixFailsTheDigest(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	data := patternBytes(24, 200_000)
	info := resumeInfo(data)
	w, _ := s.OpenResumable(ctx, info)
	w.Write(data[:100_000])
	w.Keep()
	w.Close()
	p := filepath.Join(s.Root(), "ingest", "resume-"+info.Digest.Encoded())
	f, _ := os.OpenFile(p, os.O_RDWR, 0)
	f.WriteAt([]byte("X"), 500)
	f.Close()
	w, _ = s.OpenResumable(ctx, info)
	w.Write(data[100_000:])
	if _, err := w.Commit(ctx, info.Size, info.Digest); !errors.Is(err, errs.Integrity) {
		t.Fatalf("a damaged prefix committed: %v", err)
	}
	if names := dirNames(t, filepath.Join(s.Root(), "ingest")); len(names) != 0 {
		t.Fatalf("ingest/ holds %v after a refused commit", names)
	}
	if s.Has(info.Digest) {
		t.Fatal("a damaged blob is visible")
	}
}

func TestResumableRestartDropsEverything(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	data := patternBytes(25, 300_000)
	info := resumeInfo(data)
	w, _ := s.OpenResumable(ctx, info)
	w.SetValidator(`"v1"`)
	w.Write(data[:100_000])
	w.Keep()
	w.Close()
	w, _ = s.OpenResumable(ctx, info)
	if err := w.Restart(); err != nil {
		t.Fatal(err)
	}
	if _, ok := w.Resumed(); ok || w.Size() != 0 || w.Validator() != "" {
		t.Fatalf("after Restart: size %d, validator %q", w.Size(), w.Validator())
	}
	w.Write(data)
	if d, err := w.Commit(ctx, info.Size, info.Digest); err != nil || d != info.Digest {
		t.Fatalf("Commit = %s, %v", d, err)
	}
}

// A fresh ingest writes its record once, when the validator or the first byte comes, not when it
// opens: an empty file has nothing to vouch for. From the first byte a kill leaves a record.
func TestResumableRecordWaitsForTheFirstByteOrValidator(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	data := patternBytes(27, 100_000)
	info := resumeInfo(data)
	w, err := s.OpenResumable(ctx, info)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := readRecord(t, s, info.Digest); ok {
		t.Fatal("an empty fresh ingest wrote a record")
	}
	if _, err := w.Write(data[:10]); err != nil {
		t.Fatal(err)
	}
	if got, ok := readRecord(t, s, info.Digest); !ok || got.Store != info.Store || got.Digest != info.Digest || got.Size != info.Size {
		t.Fatalf("after the first byte the record is %+v (%v), want %+v", got, ok, info)
	}
	w.Close()

	w, err = s.OpenResumable(ctx, info)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.SetValidator(`"v1"`); err != nil {
		t.Fatal(err)
	}
	if got, ok := readRecord(t, s, info.Digest); !ok || got.Validator != `"v1"` {
		t.Fatalf("after SetValidator the record is %+v (%v)", got, ok)
	}
}

func TestResumableCloseWithoutKeepRemoves(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	data := patternBytes(26, 100_000)
	w, _ := s.OpenResumable(ctx, resumeInfo(data))
	w.Write(data[:10])
	w.Close()
	if names := dirNames(t, filepath.Join(s.Root(), "ingest")); len(names) != 0 {
		t.Fatalf("ingest/ holds %v after Close without Keep", names)
	}
}

func TestResumableSecondProcessGetsItsOwnIngest(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	data := patternBytes(27, 100_000)
	info := resumeInfo(data)
	a, _ := s.OpenResumable(ctx, info)
	defer a.Close()
	a.Write(data[:10])
	b, err := s.OpenResumable(ctx, info)
	if err != nil {
		t.Fatal(err)
	}
	if b.Resumable() {
		t.Fatal("two writers share one resumable ingest")
	}
	b.Write(data)
	if _, err := b.Commit(ctx, info.Size, info.Digest); err != nil {
		t.Fatal(err)
	}
	a.Write(data[10:])
	if _, err := a.Commit(ctx, info.Size, info.Digest); err != nil {
		t.Fatalf("the second commit of one digest: %v", err)
	}
	if names := dirNames(t, filepath.Join(s.Root(), "ingest")); len(names) != 0 {
		t.Fatalf("ingest/ holds %v", names)
	}
}

// A name that no longer leads to the handle (a commit renamed it, gc removed it) is never
// written through.
func TestResumableNeverWritesARenamedFile(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	data := patternBytes(28, 100_000)
	info := resumeInfo(data)
	p := filepath.Join(s.Root(), "ingest", "resume-"+info.Digest.Encoded())
	os.WriteFile(p, data[:100], 0o600)
	f, _ := os.Open(p)
	defer f.Close()
	if !sameName(f, p) {
		t.Fatal("sameName: a file is not itself")
	}
	os.Rename(p, p+".moved")
	if sameName(f, p) {
		t.Fatal("sameName follows a renamed file")
	}
	os.WriteFile(p, nil, 0o600)
	if sameName(f, p) {
		t.Fatal("sameName takes a new file of the same name for the old")
	}
}

func TestGCKeepsResumableIngestsForTheirGrace(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	data := patternBytes(35, 100_000)
	info := resumeInfo(data)
	w, _ := s.OpenResumable(ctx, info)
	w.Write(data[:50_000])
	w.Keep()
	w.Close()
	old := time.Now().Add(-time.Hour)
	ingest := filepath.Join(s.Root(), "ingest")
	for _, n := range dirNames(t, ingest) {
		os.Chtimes(filepath.Join(ingest, n), old, old)
	}
	// The default age rule and a trim keep an hour-old partial download for the next pull.
	for _, opt := range []GCOptions{{OlderThan: 720 * time.Hour}, {OlderThan: -1, MaxSize: 1}} {
		rep, err := s.GC(ctx, opt)
		if err != nil || len(rep.Ingest) != 0 || len(dirNames(t, ingest)) != 2 {
			t.Fatalf("GC %+v removed %v (%v)", opt, rep.Ingest, err)
		}
	}
	// A shorter --older-than applies to it.
	rep, err := s.GC(ctx, GCOptions{OlderThan: 30 * time.Minute})
	if err != nil || len(rep.Ingest) != 1 || len(dirNames(t, ingest)) != 0 {
		t.Fatalf("GC --older-than 30m removed %v, left %v (%v)", rep.Ingest, dirNames(t, ingest), err)
	}
	if resumeGrace(0) != IngestGrace || resumeGrace(-1) != ResumeGrace || resumeGrace(48*time.Hour) != ResumeGrace {
		t.Fatal("resumeGrace")
	}
}

func TestGCNeverRemovesAHeldResumableIngest(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	data := patternBytes(36, 100_000)
	w, _ := s.OpenResumable(ctx, resumeInfo(data))
	defer w.Close()
	w.Write(data[:10])
	old := time.Now().Add(-48 * time.Hour)
	ingest := filepath.Join(s.Root(), "ingest")
	for _, n := range dirNames(t, ingest) {
		os.Chtimes(filepath.Join(ingest, n), old, old)
	}
	rep, err := s.GC(ctx, GCOptions{OlderThan: 0})
	if err != nil || len(rep.Ingest) != 0 {
		t.Fatalf("GC removed a live ingest: %v (%v)", rep.Ingest, err)
	}
}

func TestGCRemovesAnOrphanRecord(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	data := patternBytes(37, 100)
	meta := filepath.Join(s.Root(), "ingest", "resume-"+digest.FromBytes(data).Encoded()+".json")
	os.WriteFile(meta, []byte("{}"), 0o600)
	old := time.Now().Add(-time.Minute)
	os.Chtimes(meta, old, old)
	rep, err := s.GC(ctx, GCOptions{OlderThan: 720 * time.Hour})
	if err != nil || len(rep.Ingest) != 1 || !strings.HasSuffix(rep.Ingest[0], ".json") {
		t.Fatalf("GC: %v (%v)", rep.Ingest, err)
	}
}

// A process killed mid-ingest leaves bytes and a record that the next process continues.
func TestResumableAfterSIGKILL(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "cas")
	s, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	cmd := helperCmd(t, "resumable-stall", root)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 6)
	if _, err := io.ReadFull(out, buf); err != nil || string(buf) != "halfwa" {
		cmd.Process.Kill()
		t.Fatalf("helper said %q, %v", buf, err)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	d := patternDigest(killSeed, killSize)
	w, err := s.OpenResumable(ctx, ResumeInfo{Digest: d, Size: killSize, Store: "test"})
	if err != nil {
		t.Fatal(err)
	}
	r, ok := w.Resumed()
	if !ok || r.Offset < killSize/2 {
		t.Fatalf("resumed %+v %v after the kill", r, ok)
	}
	src := newPattern(killSeed, killSize)
	src.off = r.Offset
	if _, err := w.ReadFrom(src); err != nil {
		t.Fatal(err)
	}
	if got, err := w.Commit(context.Background(), killSize, d); err != nil || got != d {
		t.Fatalf("Commit = %s, %v", got, err)
	}
}
