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

var ctx = context.Background()

func TestIngestRoundTrip(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	data := patternBytes(1, 3<<20+17) // not a multiple of the chunk size
	want := digest.FromBytes(data)
	got, err := s.Ingest(ctx, bytes.NewReader(data), int64(len(data)), want)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("Ingest = %s, want %s", got, want)
	}
	if !s.Has(want) {
		t.Fatal("Has = false after Ingest")
	}
	if p := s.Path(want); p != filepath.Join(s.Root(), "blobs", "sha256", want.Encoded()) {
		t.Fatalf("Path = %s", p)
	}
	fi, err := os.Stat(s.Path(want))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o444 {
		t.Fatalf("blob mode %v, want 0444", fi.Mode().Perm())
	}
	for _, dir := range []string{"", "blobs", "blobs/sha256", "ingest", "records", "quarantine", "uses"} {
		fi, err := os.Stat(filepath.Join(s.Root(), dir))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o700 {
			t.Fatalf("%s mode %v, want 0700", dir, fi.Mode().Perm())
		}
	}
	info, err := s.Stat(want)
	if err != nil || info.Size != int64(len(data)) || info.Digest != want {
		t.Fatalf("Stat = %+v, %v", info, err)
	}
	for _, open := range []func(context.Context, digest.Digest) (ReaderAt, error){s.ReaderAt, s.VerifiedReaderAt} {
		ra, err := open(ctx, want)
		if err != nil {
			t.Fatal(err)
		}
		back, err := io.ReadAll(io.NewSectionReader(ra, 0, ra.Size()))
		ra.Close()
		if err != nil || !bytes.Equal(back, data) {
			t.Fatalf("read back %d bytes, err %v", len(back), err)
		}
	}
	if names := dirNames(t, filepath.Join(s.Root(), "ingest")); len(names) != 0 {
		t.Fatalf("ingest/ holds %v after a commit", names)
	}
	// Ingesting the same bytes again is a success that leaves one blob.
	if _, err := s.Ingest(ctx, bytes.NewReader(data), -1, ""); err != nil {
		t.Fatal(err)
	}
	list, err := s.List(ctx)
	if err != nil || len(list) != 1 || list[0].Digest != want {
		t.Fatalf("List = %+v, %v", list, err)
	}
}

func TestOpenTightensLoosenedFolders(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	ingest := filepath.Join(s.Root(), "ingest")
	if err := os.Chmod(ingest, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(s.Root()); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(ingest)
	if fi.Mode().Perm() != 0o700 {
		t.Fatalf("ingest/ mode %v after Open, want 0700", fi.Mode().Perm())
	}
}

func TestEmptyBlob(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	d, err := s.Ingest(ctx, strings.NewReader(""), 0, digest.FromBytes(nil))
	if err != nil || d != digest.FromBytes(nil) || !s.Has(d) {
		t.Fatalf("Ingest(empty) = %s, %v", d, err)
	}
}

func TestIngestRefusesMismatches(t *testing.T) {
	t.Parallel()
	data := patternBytes(2, 2<<20+5)
	good := digest.FromBytes(data)
	other := digest.FromBytes([]byte("something else"))
	cases := []struct {
		name    string
		stream  []byte
		size    int64
		want    digest.Digest
		mention []string // values the sentence must name
	}{
		{"shorter than announced", data[:len(data)-1], int64(len(data)), good, []string{"2097157", "2097156"}},
		{"longer than announced", append(append([]byte{}, data...), 'x'), int64(len(data)), good, []string{"2097157", "2097158"}},
		{"wrong digest", data, int64(len(data)), other, []string{string(other), string(good)}},
		{"wrong digest, size unchecked", data, -1, other, []string{string(other), string(good)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := openStore(t)
			_, err := s.Ingest(ctx, bytes.NewReader(c.stream), c.size, c.want)
			if !errors.Is(err, errs.Integrity) {
				t.Fatalf("err = %v, want integrity", err)
			}
			for _, m := range c.mention {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not name %s", err, m)
				}
			}
			if s.Has(good) || s.Has(other) || s.Has(digest.FromBytes(c.stream)) {
				t.Error("a blob is visible after a refused ingest")
			}
			if names := dirNames(t, filepath.Join(s.Root(), "blobs", "sha256")); len(names) != 0 {
				t.Errorf("blobs/sha256 holds %v", names)
			}
			if names := dirNames(t, filepath.Join(s.Root(), "ingest")); len(names) != 0 {
				t.Errorf("ingest/ holds %v", names)
			}
		})
	}
}

func TestWriterStagesUntilCommit(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	data := patternBytes(3, 1<<20+999)
	w, err := s.NewWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// Small writes, as a network body delivers them.
	for off := 0; off < len(data); off += 4093 {
		if _, err := w.Write(data[off:min(off+4093, len(data))]); err != nil {
			t.Fatal(err)
		}
	}
	if w.Size() != int64(len(data)) {
		t.Fatalf("Size = %d", w.Size())
	}
	if w.Digest() != digest.FromBytes(data) {
		t.Fatal("Digest before commit differs from the data's")
	}
	buf := make([]byte, 100)
	if n, err := w.ReadAt(buf, 1<<20); err != nil || n != 100 || !bytes.Equal(buf, data[1<<20:1<<20+100]) {
		t.Fatalf("ReadAt = %d, %v", n, err)
	}
	tail := make([]byte, 2000)
	if n, err := w.ReadAt(tail, int64(len(data)-1000)); n != 1000 || err != io.EOF || !bytes.Equal(tail[:n], data[len(data)-1000:]) {
		t.Fatalf("ReadAt at the end = %d, %v", n, err)
	}
	if s.Has(digest.FromBytes(data)) {
		t.Fatal("blob visible before Commit")
	}
	// Writing goes on after a ReadAt.
	if _, err := w.Write([]byte("more")); err != nil {
		t.Fatal(err)
	}
	full := append(append([]byte{}, data...), "more"...)
	d, err := w.Commit(ctx, int64(len(full)), digest.FromBytes(full))
	if err != nil || d != digest.FromBytes(full) {
		t.Fatalf("Commit = %s, %v", d, err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Close after Commit: %v", err)
	}
	if _, err := w.Write([]byte("x")); err == nil {
		t.Fatal("Write after Commit succeeded")
	}
	if !s.Has(d) {
		t.Fatal("blob not visible after Commit")
	}
}

func TestWriterCloseAborts(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	w, err := s.NewWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(patternBytes(4, 3<<20))
	if names := dirNames(t, filepath.Join(s.Root(), "ingest")); len(names) != 1 {
		t.Fatalf("ingest/ holds %v during the ingest, want one temporary file", names)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if names := dirNames(t, filepath.Join(s.Root(), "ingest")); len(names) != 0 {
		t.Fatalf("ingest/ holds %v after Close", names)
	}
	if _, err := w.Commit(ctx, -1, ""); err == nil {
		t.Fatal("Commit after Close succeeded")
	}
	if l, _ := s.List(ctx); len(l) != 0 {
		t.Fatalf("List = %v", l)
	}
}

func TestIngestHonoursCancel(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	c, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Ingest(c, newPattern(5, 8<<20), -1, ""); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want canceled", err)
	}
	if names := dirNames(t, filepath.Join(s.Root(), "ingest")); len(names) != 0 {
		t.Fatalf("ingest/ holds %v", names)
	}
}

func TestBadDigestsRefused(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	good, err := s.Ingest(ctx, strings.NewReader("hello"), 5, "")
	if err != nil {
		t.Fatal(err)
	}
	bad := []digest.Digest{
		"not-a-digest",
		"sha256:" + digest.Digest(strings.ToUpper(good.Encoded())),
		"sha256:abc",
		"sha256:../../../../etc/passwd",
		"sha512:" + digest.Digest(strings.Repeat("ab", 64)),
		"md5:d41d8cd98f00b204e9800998ecf8427e",
		digest.Digest(good.Encoded()), // bare hex
	}
	for _, d := range bad {
		if s.Has(d) {
			t.Errorf("Has(%q) = true", d)
		}
		if p := s.Path(d); p != "" {
			t.Errorf("Path(%q) = %q, want empty", d, p)
		}
		checks := map[string]error{}
		_, checks["Stat"] = s.Stat(d)
		_, checks["ReaderAt"] = s.ReaderAt(ctx, d)
		_, checks["VerifiedReaderAt"] = s.VerifiedReaderAt(ctx, d)
		checks["Verify"] = s.Verify(ctx, d)
		checks["Touch"] = s.Touch(d)
		_, checks["Ingest"] = s.Ingest(ctx, strings.NewReader("hello"), 5, d)
		_, checks["Records"] = s.Records(d)
		checks["AppendRecord"] = s.AppendRecord(Record{Ref: "acme/x", Digest: d})
		w, err := s.NewWriter(ctx)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte("hello"))
		_, checks["Commit"] = w.Commit(ctx, 5, d)
		for name, err := range checks {
			if !errors.Is(err, errs.Usage) {
				t.Errorf("%s(%q) err = %v, want usage", name, d, err)
			}
		}
	}
	if names := dirNames(t, filepath.Join(s.Root(), "ingest")); len(names) != 0 {
		t.Fatalf("ingest/ holds %v", names)
	}
	if list, _ := s.List(ctx); len(list) != 1 {
		t.Fatalf("List = %v, want the one good blob", list)
	}
	if r, _ := s.Records(""); len(r) != 0 {
		t.Fatalf("records were written for bad digests: %v", r)
	}
}

func TestStatMissingIsNotFound(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	d := digest.FromBytes([]byte("absent"))
	if _, err := s.Stat(d); !errors.Is(err, errs.NotFound) {
		t.Fatalf("Stat err = %v", err)
	}
	if _, err := s.ReaderAt(ctx, d); !errors.Is(err, errs.NotFound) {
		t.Fatalf("ReaderAt err = %v", err)
	}
	if _, err := s.VerifiedReaderAt(ctx, d); !errors.Is(err, errs.NotFound) {
		t.Fatalf("VerifiedReaderAt err = %v", err)
	}
	if err := s.Verify(ctx, d); !errors.Is(err, errs.NotFound) {
		t.Fatalf("Verify err = %v", err)
	}
}

type failingReader struct{ n int }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, errors.New("connection reset by peer")
	}
	m := min(len(p), r.n)
	r.n -= m
	return m, nil
}

func TestIngestStreamErrorLeavesNothing(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	_, err := s.Ingest(ctx, &failingReader{n: 3 << 20}, -1, "")
	if !errors.Is(err, errs.IO) || !strings.Contains(err.Error(), "connection reset") || !strings.Contains(err.Error(), "3145728") {
		t.Fatalf("err = %v, want an io error naming the cause and the bytes read", err)
	}
	if names := dirNames(t, filepath.Join(s.Root(), "ingest")); len(names) != 0 {
		t.Fatalf("ingest/ holds %v", names)
	}
	if l, _ := s.List(ctx); len(l) != 0 {
		t.Fatalf("List = %v", l)
	}
}
