package verify

import (
	"bytes"
	"context"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/fetch/stage"
	"github.com/murmur-nexus/mur/internal/artifact"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
	"github.com/murmur-nexus/mur/internal/errs"
)

// mur verify reads zstd blobs as it reads deflated ones: a blob checks out from its directory
// alone, with no entry decoded (so one whose zstd payload does not match its CRC-32 checks out
// too, which decoding the entry would refuse), and a good one's payload reads back for the
// compiled cache. A damaged zstd entry is refused where the blob is admitted (fetch's
// TestImportRefusesAnArtifactWhosePayloadLies, and the pull's checks), not here.
func TestCheckBlobZstd(t *testing.T) {
	store, err := cas.Open(filepath.Join(t.TempDir(), "cas"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	wasm := artifacttest.Module(1<<20, 5)
	spec := artifacttest.Spec{Name: "tool", Version: "1.0.0", Wasm: wasm, Compression: artifact.Zstd}
	lying := spec.Raw(artifact.MethodZstd, artifacttest.Compress(artifact.MethodZstd, wasm), crc32.ChecksumIEEE(wasm)^1, uint64(len(wasm)))
	var d digest.Digest
	for _, blob := range [][]byte{lying, spec.Zip()} {
		var err error
		if d, err = store.Ingest(ctx, bytes.NewReader(blob), int64(len(blob)), digest.FromBytes(blob)); err != nil {
			t.Fatal(err)
		}
		a, err := checkBlob(ctx, store, d)
		if err != nil || a.PayloadSize != int64(len(wasm)) || a.PayloadName != "capsule.wasm" {
			t.Fatalf("checkBlob of a zstd blob that hashes right: %v", err)
		}
	}
	_, got, release, err := stage.ReadBlob(ctx, store, d, true)
	defer release()
	if err != nil || !bytes.Equal(got, wasm) {
		t.Fatalf("ReadBlob: %d bytes, %v", len(got), err)
	}
}

// A blob damaged on disk still hashes wrong, whatever its zip says: checkBlob reports the hash,
// not the zip, and moves the blob to quarantine so that a repair fetches it again.
func TestCheckBlobDamagedOnDisk(t *testing.T) {
	store, err := cas.Open(filepath.Join(t.TempDir(), "cas"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	blob := artifacttest.Spec{Name: "tool", Version: "1.0.0", Wasm: artifacttest.Module(256<<10, 7)}.Zip()
	d, err := store.Ingest(ctx, bytes.NewReader(blob), int64(len(blob)), digest.FromBytes(blob))
	if err != nil {
		t.Fatal(err)
	}
	// A byte in the middle of the payload: the directory still reads, only the hash can tell.
	bad := append([]byte(nil), blob...)
	bad[len(bad)/2] ^= 0x01
	path := store.Path(d)
	os.Chmod(path, 0o644)
	if err := os.WriteFile(path, bad, 0o444); err != nil {
		t.Fatal(err)
	}
	_, err = checkBlob(ctx, store, d)
	if !errors.Is(err, errs.Integrity) || store.Has(d) {
		t.Fatalf("want an integrity error and the blob quarantined, got %v (present: %v)", err, store.Has(d))
	}
}
