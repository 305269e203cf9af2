package verify

import (
	"bytes"
	"context"
	"hash/crc32"
	"path/filepath"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/fetch/stage"
	"github.com/murmur-nexus/mur/internal/artifact"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
)

// mur verify reads zstd payloads as it reads deflated ones: a good blob checks out, and its
// payload reads back for the compiled cache; a damaged one that hashes right is named as not a
// valid artifact, and stays where it is (the pinned bytes are what is wrong).
func TestCheckBlobZstd(t *testing.T) {
	store, err := cas.Open(filepath.Join(t.TempDir(), "cas"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ingest := func(b []byte) digest.Digest {
		t.Helper()
		d, err := store.Ingest(ctx, bytes.NewReader(b), int64(len(b)), digest.FromBytes(b))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	wasm := artifacttest.Module(1<<20, 5)
	spec := artifacttest.Spec{Name: "tool", Version: "1.0.0", Wasm: wasm, Compression: artifact.Zstd}
	d := ingest(spec.Zip())
	a, err := checkBlob(ctx, store, d)
	if err != nil || a.PayloadSize != int64(len(wasm)) {
		t.Fatalf("checkBlob of a good zstd blob: %v", err)
	}
	if _, got, err := stage.ReadBlob(ctx, store, d, true); err != nil || !bytes.Equal(got, wasm) {
		t.Fatalf("ReadBlob: %d bytes, %v", len(got), err)
	}

	body := artifacttest.Compress(artifact.MethodZstd, wasm)
	second := artifacttest.Compress(artifact.MethodZstd, wasm[4096:])
	second[len(second)/2] ^= 0x55
	crc := crc32.ChecksumIEEE(wasm)
	for name, c := range map[string]struct {
		blob    []byte
		mention string
	}{
		"bad frame":                  {spec.Raw(artifact.MethodZstd, append(artifacttest.Compress(artifact.MethodZstd, wasm[:4096]), second...), crc, uint64(len(wasm))), "damaged"},
		"wrong CRC":                  {spec.Raw(artifact.MethodZstd, body, crc^1, uint64(len(wasm))), "checksum crc32:"},
		"frame larger than declared": {spec.Raw(artifact.MethodZstd, body, crc, uint64(len(wasm)-1)), "declare"},
	} {
		t.Run(name, func(t *testing.T) {
			d := ingest(c.blob)
			_, err := checkBlob(ctx, store, d)
			errtest.WantToken(t, err, errs.InvalidArtifact, `payload "capsule.wasm"`, c.mention)
			if !store.Has(d) {
				t.Error("a blob that hashes right was moved")
			}
		})
	}
}
