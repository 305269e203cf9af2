package main

import (
	"bytes"
	"context"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
)

// mur cache import checks a packed artifact's entries before admitting it, since mur verify
// trusts a blob that hashes right: a bundle whose artifact hashes to its name but whose payload
// does not match its CRC-32 is refused (invalid-bundle), naming the bundle, the entry and the
// checksum, and the blob is not in the home.
func TestCacheImportRefusesAPayloadWhoseCRCLies(t *testing.T) {
	t.Parallel()
	wasm := artifacttest.Module(64<<10, 3)
	lie := artifacttest.Spec{Name: "tool", Version: "1.0.0", Wasm: wasm}.Lying(false, crc32.ChecksumIEEE(wasm)^1, uint64(len(wasm)))
	ctx := context.Background()
	src, err := cas.Open(filepath.Join(t.TempDir(), "src"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := src.Ingest(ctx, bytes.NewReader(lie), int64(len(lie)), digest.FromBytes(lie))
	if err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(t.TempDir(), "lie.tar.zst")
	var buf bytes.Buffer
	if _, err := src.Export(ctx, []digest.Digest{d}, &buf); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bundle, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(t.TempDir(), "home")
	code, _, errOut := runMur(t, "--home", home, "cache", "import", bundle)
	for _, want := range []string{"invalid-bundle", bundle, "blobs/sha256/" + d.Encoded(), "checksum crc32:", "nothing of that blob was admitted"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr does not say %q:\n%s", want, errOut)
		}
	}
	if code == 0 {
		t.Fatal("the import succeeded")
	}
	if _, err := os.Stat(filepath.Join(home, "cas", "blobs", "sha256", d.Encoded())); !os.IsNotExist(err) {
		t.Fatalf("the lying blob is in the home: %v", err)
	}
}
