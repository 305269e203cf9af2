package fetch_test

import (
	"bytes"
	"context"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/internal/artifact"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
	"github.com/murmur-nexus/mur/internal/errs"
)

// bundleOf exports blobs, ingested as they are into a store of their own (the way a home whose
// CAS was written around every check would hold them), in their order, as a cache bundle.
func bundleOf(t *testing.T, blobs ...[]byte) ([]byte, []digest.Digest) {
	t.Helper()
	ctx := context.Background()
	src, err := cas.Open(filepath.Join(t.TempDir(), "src"))
	if err != nil {
		t.Fatal(err)
	}
	var ds []digest.Digest
	for _, b := range blobs {
		d, err := src.Ingest(ctx, bytes.NewReader(b), int64(len(b)), digest.FromBytes(b))
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
	}
	var buf bytes.Buffer
	if _, err := src.Export(ctx, ds, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), ds
}

// The entries' check that mur verify relies on runs when a bundle is imported: a packed artifact
// that hashes to its name but whose payload is not what its zip records (a CRC-32 that is not its
// bytes', a zstd frame that is damaged or holds more than the zip declares) is refused, with the
// bundle, the entry and the problem named. Nothing of it is admitted, and the blobs before it in
// the bundle (a JSON blob, good deflated and zstd artifacts) stay.
func TestImportRefusesAnArtifactWhosePayloadLies(t *testing.T) {
	wasm := artifacttest.Module(1<<20, 5)
	crc := crc32.ChecksumIEEE(wasm)
	spec := artifacttest.Spec{Name: "tool", Version: "1.0.0", Wasm: wasm}
	zspec := spec
	zspec.Compression = artifact.Zstd
	body := artifacttest.Compress(artifact.MethodZstd, wasm)
	second := artifacttest.Compress(artifact.MethodZstd, wasm[4096:])
	second[len(second)/2] ^= 0x55
	good := [][]byte{[]byte(`{"not":"an artifact"}`), spec.Zip(), zspec.Zip()}
	for name, c := range map[string]struct {
		blob    []byte
		mention string
	}{
		"deflated, wrong CRC":              {spec.Lying(false, crc^0x80, uint64(len(wasm))), "checksum crc32:"},
		"stored, wrong CRC":                {spec.Lying(true, crc^0x80, uint64(len(wasm))), "checksum crc32:"},
		"zstd, bad frame":                  {spec.Raw(artifact.MethodZstd, append(artifacttest.Compress(artifact.MethodZstd, wasm[:4096]), second...), crc, uint64(len(wasm))), "damaged"},
		"zstd, wrong CRC":                  {spec.Raw(artifact.MethodZstd, body, crc^1, uint64(len(wasm))), "checksum crc32:"},
		"zstd, frame larger than declared": {spec.Raw(artifact.MethodZstd, body, crc, uint64(len(wasm)-1)), "declare"},
	} {
		t.Run(name, func(t *testing.T) {
			b, ds := bundleOf(t, append(good, c.blob, []byte("after the refusal"))...)
			lie := ds[len(good)]
			dst, err := cas.Open(filepath.Join(t.TempDir(), "dst"))
			if err != nil {
				t.Fatal(err)
			}
			rep, err := dst.Import(context.Background(), bytes.NewReader(b), "lie.tar.zst", fetch.CheckImportedBlob)
			if !errors.Is(err, errs.InvalidBundle) {
				t.Fatalf("want invalid-bundle, got %v", err)
			}
			for _, want := range []string{"lie.tar.zst", "blobs/sha256/" + lie.Encoded(), `payload "capsule.wasm"`, c.mention, "nothing of that blob was admitted"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the refusal does not say %q: %v", want, err)
				}
			}
			if rep.Blobs != len(good) {
				t.Errorf("%d blobs admitted, want the %d before the refused one", rep.Blobs, len(good))
			}
			for i, d := range ds {
				if want := i < len(good); dst.Has(d) != want {
					t.Errorf("blob %d of the bundle: present %v, want %v", i, !want, want)
				}
			}
			if left, _ := os.ReadDir(filepath.Join(dst.Root(), "ingest")); len(left) != 0 {
				t.Errorf("the refused blob left %d files in ingest/", len(left))
			}
		})
	}
}

// A bundle of good blobs is admitted whole through the same check, and a zip that is no packed
// artifact (its directory does not read) is admitted as it is: mur never installs it, and a pull
// or verify that reads it as an artifact refuses it.
func TestImportAdmitsGoodArtifactsAndOtherBlobs(t *testing.T) {
	wasm := artifacttest.Module(256<<10, 9)
	spec := artifacttest.Spec{Name: "tool", Version: "1.0.0", Wasm: wasm}
	zspec := spec
	zspec.Compression = artifact.Zstd
	notArtifact := damageDirectory(spec.Zip())
	b, ds := bundleOf(t, spec.Zip(), zspec.Zip(), []byte(`{"a":"provenance bundle"}`), notArtifact)
	dst, err := cas.Open(filepath.Join(t.TempDir(), "dst"))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := dst.Import(context.Background(), bytes.NewReader(b), "good.tar.zst", fetch.CheckImportedBlob)
	if err != nil || rep.Blobs != len(ds) {
		t.Fatalf("import: %+v, %v", rep, err)
	}
}

// A ceiling set wrong leaves no entry judged, so the import admits no artifact rather than
// admitting it unchecked.
func TestImportWithABadCeilingAdmitsNoArtifact(t *testing.T) {
	b, ds := bundleOf(t, artifacttest.Spec{Name: "tool", Version: "1.0.0"}.Zip())
	t.Setenv(artifact.EnvMaxDecompressed, "lots")
	dst, err := cas.Open(filepath.Join(t.TempDir(), "dst"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = dst.Import(context.Background(), bytes.NewReader(b), "b.tar.zst", fetch.CheckImportedBlob)
	if !errors.Is(err, errs.InvalidConfig) || errs.TokenOf(err) != errs.InvalidConfig || strings.Contains(err.Error(), "damaged") || dst.Has(ds[0]) {
		t.Fatalf("want an invalid-config refusal and nothing admitted, got %v", err)
	}
}

// damageDirectory flips a byte of the zip's end-of-central-directory record, the last 22 bytes
// of an archive without a comment: the directory no longer reads.
func damageDirectory(b []byte) []byte {
	b = append([]byte(nil), b...)
	b[len(b)-22] ^= 0xff
	return b
}
