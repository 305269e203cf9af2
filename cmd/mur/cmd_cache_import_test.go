package main

import (
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
	bundle, d := bundleOf(t, lie)
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
