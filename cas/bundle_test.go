package cas_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/internal/errs"
)

func newStore(t *testing.T) *cas.Store {
	t.Helper()
	s, err := cas.Open(filepath.Join(t.TempDir(), "cas"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func ingest(t *testing.T, s *cas.Store, data string) digest.Digest {
	t.Helper()
	d, err := s.Ingest(context.Background(), strings.NewReader(data), int64(len(data)), digest.FromString(data))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestExportImportRoundTrip(t *testing.T) {
	t.Parallel()
	src := newStore(t)
	a, b := ingest(t, src, "alpha payload"), ingest(t, src, "beta payload")
	src.AppendRecord(cas.Record{Name: "acme/a", Version: "1.0.0", Digest: a, Size: 13, Source: "oci://x/y", Outcome: "pulled"})
	var buf bytes.Buffer
	n, err := src.Export(context.Background(), []digest.Digest{a, b, a}, &buf)
	if err != nil || n != 2 {
		t.Fatalf("export: %d %v", n, err)
	}
	dst := newStore(t)
	rep, err := dst.Import(context.Background(), bytes.NewReader(buf.Bytes()), "b.tar.zst", nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Blobs != 2 || rep.Records != 1 {
		t.Fatalf("report %+v", rep)
	}
	for _, d := range []digest.Digest{a, b} {
		if err := dst.Verify(context.Background(), d); err != nil {
			t.Fatalf("imported %s: %v", d, err)
		}
	}
	recs, _ := dst.Records(a)
	if len(recs) != 1 || recs[0].Name != "acme/a" {
		t.Fatalf("records %+v", recs)
	}
	// Importing again admits nothing new.
	rep, err = dst.Import(context.Background(), bytes.NewReader(buf.Bytes()), "b.tar.zst", nil)
	if err != nil || rep.Already != 2 || rep.Blobs != 0 || rep.Records != 0 || rep.RecordsAlready != 1 {
		t.Fatalf("second import: %+v %v", rep, err)
	}
	if recs, _ := dst.Records(""); len(recs) != 1 {
		t.Fatalf("a second import of the same bundle duplicated its records: %+v", recs)
	}
	// Nor does a bundle imported back into the home it came from.
	rep, err = src.Import(context.Background(), bytes.NewReader(buf.Bytes()), "b.tar.zst", nil)
	if err != nil || rep.Records != 0 || rep.RecordsAlready != 1 {
		t.Fatalf("import into the source home: %+v %v", rep, err)
	}
	if recs, _ := src.Records(""); len(recs) != 1 {
		t.Fatalf("importing a bundle into its own home duplicated its records: %+v", recs)
	}
}

func TestExportRefusesMissingBlob(t *testing.T) {
	t.Parallel()
	src := newStore(t)
	var buf bytes.Buffer
	if _, err := src.Export(context.Background(), []digest.Digest{digest.FromString("nope")}, &buf); !errors.Is(err, errs.NotFound) {
		t.Fatalf("want not-found, got %v", err)
	}
}

type entry struct {
	name string
	typ  byte
	body []byte
	size int64 // header size when >= 0 and differing from len(body)
}

func makeBundle(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := zstd.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		h := &tar.Header{Name: e.name, Typeflag: typ, Mode: 0o644, Size: int64(len(e.body))}
		if typ == tar.TypeSymlink {
			h.Linkname, h.Size = "/etc/passwd", 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Write(e.body)
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

func hexOf(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func TestImportRefusesHostileBundles(t *testing.T) {
	t.Parallel()
	good := entry{name: "blobs/sha256/" + hexOf("good"), body: []byte("good")}
	cases := map[string][]byte{
		"dotdot path":       makeBundle(t, good, entry{name: "../../etc/cron.d/x", body: []byte("x")}),
		"dotdot in blobs":   makeBundle(t, entry{name: "blobs/sha256/" + "../../x", body: []byte("x")}),
		"unknown path":      makeBundle(t, entry{name: "notes.txt", body: []byte("x")}),
		"symlink":           makeBundle(t, entry{name: "blobs/sha256/" + hexOf("x"), typ: tar.TypeSymlink}),
		"blob not its name": makeBundle(t, entry{name: "blobs/sha256/" + hexOf("expected"), body: []byte("forged")}),
		"uppercase hex":     makeBundle(t, entry{name: "blobs/sha256/" + strings.ToUpper(hexOf("x")), body: []byte("x")}),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			s := newStore(t)
			_, err := s.Import(context.Background(), bytes.NewReader(b), "evil.tar.zst", nil)
			if !errors.Is(err, errs.InvalidBundle) {
				t.Fatalf("want invalid-bundle, got %v", err)
			}
			if !strings.Contains(err.Error(), "evil.tar.zst") {
				t.Errorf("error does not name the bundle: %v", err)
			}
			list, _ := s.List(context.Background())
			for _, bi := range list {
				if err := s.Verify(context.Background(), bi.Digest); err != nil {
					t.Errorf("an unverified blob was admitted: %v", err)
				}
			}
			if s.Has(digest.FromString("forged")) || s.Has(digest.FromString("expected")) {
				t.Error("the forged blob is visible")
			}
		})
	}
}

func TestImportRefusesTruncatedBundle(t *testing.T) {
	t.Parallel()
	src := newStore(t)
	d := ingest(t, src, strings.Repeat("payload ", 100000))
	var buf bytes.Buffer
	if _, err := src.Export(context.Background(), []digest.Digest{d}, &buf); err != nil {
		t.Fatal(err)
	}
	cut := buf.Bytes()[:buf.Len()/2]
	dst := newStore(t)
	_, err := dst.Import(context.Background(), bytes.NewReader(cut), "cut.tar.zst", nil)
	if !errors.Is(err, errs.InvalidBundle) && !errors.Is(err, errs.Integrity) {
		t.Fatalf("want invalid-bundle, got %v", err)
	}
	if dst.Has(d) {
		t.Fatal("a truncated blob became visible")
	}
}

func TestImportRefusesZstdBomb(t *testing.T) {
	t.Parallel()
	// One entry claiming far more than the ceiling: refused from its header, before any of the
	// (highly compressible) body is inflated.
	var buf bytes.Buffer
	zw, _ := zstd.NewWriter(&buf, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	tw := tar.NewWriter(zw)
	const size = cas.MaxBundleBlobBytes + 1
	tw.WriteHeader(&tar.Header{Name: "blobs/sha256/" + hexOf("bomb"), Typeflag: tar.TypeReg, Mode: 0o644, Size: size})
	zeros := make([]byte, 1<<20)
	for written := int64(0); written < 8<<20; written += int64(len(zeros)) {
		tw.Write(zeros)
	}
	zw.Close() // the tar is left unfinished on purpose: the reader must stop at the header
	if buf.Len() > 1<<20 {
		t.Fatalf("bomb is %d bytes compressed; the test wants a small one", buf.Len())
	}
	s := newStore(t)
	_, err := s.Import(context.Background(), bytes.NewReader(buf.Bytes()), "bomb.tar.zst", nil)
	if !errors.Is(err, errs.InvalidBundle) || !strings.Contains(err.Error(), "ceiling") {
		t.Fatalf("want an invalid-bundle ceiling error, got %v", err)
	}
}

func TestImportRefusesNonZstd(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	if _, err := s.Import(context.Background(), strings.NewReader("plain text, not a bundle"), "x", nil); err == nil {
		t.Fatal("accepted a non-zstd file")
	}
}

// Import's check sees each new blob whole, once it hashes to its name, before it is visible: a
// refusal refuses the bundle there, with nothing of that blob stored (not even its ingest file),
// while the blobs admitted before it stay. Bytes that do not hash to their name never reach it.
func TestImportCheckRefusesBeforeVisible(t *testing.T) {
	t.Parallel()
	entries := []entry{
		{name: "blobs/sha256/" + hexOf("first"), body: []byte("first")},
		{name: "blobs/sha256/" + hexOf("refused"), body: []byte("refused")},
		{name: "blobs/sha256/" + hexOf("after"), body: []byte("after")},
	}
	var seen []string
	check := func(blob cas.ReaderAt) error {
		b := make([]byte, blob.Size())
		if _, err := blob.ReadAt(b, 0); err != nil {
			t.Fatalf("the check can't read the blob: %v", err)
		}
		seen = append(seen, string(b))
		if string(b) == "refused" {
			return errs.New(errs.InvalidArtifact, "its payload lies")
		}
		return nil
	}
	s := newStore(t)
	rep, err := s.Import(context.Background(), bytes.NewReader(makeBundle(t, entries...)), "lie.tar.zst", check)
	if !errors.Is(err, errs.InvalidBundle) {
		t.Fatalf("want invalid-bundle, got %v", err)
	}
	for _, want := range []string{"lie.tar.zst", entries[1].name, "its payload lies", "nothing of that blob was admitted"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}
	if strings.Join(seen, ",") != "first,refused" || rep.Blobs != 1 {
		t.Fatalf("the check saw %q; %d admitted", seen, rep.Blobs)
	}
	if !s.Has(digest.FromString("first")) || s.Has(digest.FromString("refused")) || s.Has(digest.FromString("after")) {
		t.Fatal("want the blob before the refusal kept and nothing of the refused one or after it")
	}
	if left, _ := os.ReadDir(filepath.Join(s.Root(), "ingest")); len(left) != 0 {
		t.Fatalf("the refused blob left %d files in ingest/", len(left))
	}

	seen = nil
	forged := makeBundle(t, entry{name: "blobs/sha256/" + hexOf("expected"), body: []byte("refused")})
	_, err = newStore(t).Import(context.Background(), bytes.NewReader(forged), "forged.tar.zst", check)
	if !errors.Is(err, errs.InvalidBundle) || !strings.Contains(err.Error(), "does not hash to its name") || len(seen) != 0 {
		t.Fatalf("a blob that is not its name reached the check (%q) or was not refused for its hash: %v", seen, err)
	}
}
