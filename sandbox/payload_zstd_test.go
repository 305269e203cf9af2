package sandbox

import (
	"bytes"
	"context"
	"hash/crc32"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/internal/artifact"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
)

// `mur run` of an artifact packed with zstd: the payload is decoded from the verified blob (and
// kept), and the guest runs. A damaged zstd payload is refused with invalid-artifact.
func TestRunZstdPayload(t *testing.T) {
	t.Parallel()
	store, err := cas.Open(filepath.Join(t.TempDir(), "cas"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	wasm := goGuest(t)
	spec := artifacttest.Spec{Name: "hello", Version: "1.0.0", Wasm: wasm, Compression: artifact.Zstd}
	blob := spec.Zip()
	d, err := store.Ingest(ctx, bytes.NewReader(blob), int64(len(blob)), digest.FromBytes(blob))
	if err != nil {
		t.Fatal(err)
	}
	if a, err := artifact.Read(bytes.NewReader(blob), int64(len(blob))); err != nil {
		t.Fatal(err)
	} else if _, method, _, _ := a.PayloadEntry(); method != artifact.MethodZstd {
		t.Fatalf("the payload was packed with method %d", method)
	}
	kept := filepath.Join(t.TempDir(), "payloads")
	var loaded []byte
	for _, round := range []string{"decoded", "kept"} {
		got, _, err := LoadPayload(ctx, store, d, kept)
		if err != nil || !bytes.Equal(got, wasm) {
			t.Fatalf("%s: LoadPayload = %d bytes, %v; want the %d-byte guest", round, len(got), err, len(wasm))
		}
		loaded = got
	}
	res := run(t, sharedRunner(t), loaded, Config{Args: []string{"hello"}})
	if res.code != 0 || res.err != nil || !strings.HasPrefix(res.stdout, "hello from hello") {
		t.Fatalf("Run = %d, %v, %q", res.code, res.err, res.stdout)
	}

	// The guest's frame cut short of its checksum: it hashes right in the CAS, and is no payload.
	body := artifacttest.Compress(artifact.MethodZstd, wasm)
	damaged := spec.Raw(artifact.MethodZstd, body[:len(body)-4], crc32.ChecksumIEEE(wasm), uint64(len(wasm)))
	dd, err := store.Ingest(ctx, bytes.NewReader(damaged), int64(len(damaged)), digest.FromBytes(damaged))
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = LoadPayload(ctx, store, dd, "")
	errtest.WantToken(t, err, errs.InvalidArtifact, `payload "capsule.wasm"`, "damaged")
}
