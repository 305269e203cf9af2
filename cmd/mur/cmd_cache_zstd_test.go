package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
)

// bundleOf writes a bundle of b, as cache export writes it, and returns its path and b's digest.
func bundleOf(t *testing.T, b []byte) (string, digest.Digest) {
	t.Helper()
	src, d := ingestRaw(t, filepath.Join(t.TempDir(), "src"), b)
	var buf bytes.Buffer
	if _, err := src.Export(context.Background(), []digest.Digest{d}, &buf); err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(t.TempDir(), "b.tar.zst")
	if err := os.WriteFile(bundle, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return bundle, d
}

// ingestRaw puts b into the CAS at root, as it is, with no check.
func ingestRaw(t *testing.T, root string, b []byte) (*cas.Store, digest.Digest) {
	t.Helper()
	s, err := cas.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	d, err := s.Ingest(context.Background(), bytes.NewReader(b), int64(len(b)), digest.FromBytes(b))
	if err != nil {
		t.Fatal(err)
	}
	return s, d
}

// What a pull refuses of a zstd payload, cache import refuses too, and cache verify does not call
// sound: each of the packed artifacts below hashes to its name, and is refused by import
// (invalid-bundle, nothing admitted) and moved to quarantine by verify (integrity), naming the
// zstd data's fault. A blob that is no zip (a provenance bundle) is admitted and kept as it is.
func TestCacheImportAndVerifyRefuseZstdAPullRefuses(t *testing.T) {
	spec := artifacttest.Spec{Name: "tool", Version: "1.0.0", Wasm: artifacttest.Module(64<<10, 3)}
	for name, c := range map[string]struct {
		z    []byte
		says string
	}{
		"a 2 GiB window":                   {spec.ZstdRefused()["a 2 GiB window"], "needs a 2147483648-byte window"},
		"one 400 MiB segment":              {spec.ZstdRefused()["one 400 MiB segment"], "needs a 419430400-byte window"},
		"a skippable frame past the entry": {spec.ZstdRefused()["a skippable frame past the entry"], "ends in the middle of a frame"},
		"a skippable frame after the data": {spec.ZstdRefused()["a skippable frame after the data"], "bytes of zstd stream, but the zip records"},
	} {
		t.Run(name, func(t *testing.T) {
			json := []byte(`{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json"}`)
			bundle, d := bundleOf(t, c.z)
			home := filepath.Join(t.TempDir(), "home")
			code, _, errOut := runMur(t, "--home", home, "cache", "import", bundle)
			for _, want := range []string{"mur: invalid-bundle: ", d.Encoded(), c.says, "nothing of that blob was admitted"} {
				if !strings.Contains(errOut, want) {
					t.Errorf("cache import: stderr does not say %q:\n%s", want, errOut)
				}
			}
			if code == 0 {
				t.Error("cache import admitted it")
			}
			if _, err := os.Stat(filepath.Join(home, "cas", "blobs", "sha256", d.Encoded())); !os.IsNotExist(err) {
				t.Errorf("the blob is in the home: %v", err)
			}

			// The same bytes already in a home: cache verify moves them aside, and keeps the JSON.
			s, _ := ingestRaw(t, filepath.Join(home, "cas"), c.z)
			ingestRaw(t, filepath.Join(home, "cas"), json)
			code, out, errOut := runMur(t, "--home", home, "cache", "verify")
			if code != 1 || !strings.Contains(errOut, "mur: integrity: ") {
				t.Errorf("cache verify: exit %d, stderr %s", code, errOut)
			}
			if !strings.Contains(out, string(d)+": ") || !strings.Contains(out, c.says) || !strings.Contains(out, "quarantine") || !strings.Contains(out, "checked 2 blobs") {
				t.Errorf("cache verify: stdout does not name %s, %q and where it went:\n%s", d, c.says, out)
			}
			if s.Has(d) || !s.Has(digest.FromBytes(json)) {
				t.Errorf("after cache verify: the refused blob is there: %v, the JSON is gone: %v", s.Has(d), !s.Has(digest.FromBytes(json)))
			}
		})
	}
}

// A decompression ceiling set wrong fails cache verify before it judges a blob: every artifact
// would be refused, and moved to quarantine.
func TestCacheVerifyRefusesABadCeilingFirst(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	s, d := ingestRaw(t, filepath.Join(home, "cas"), artifacttest.Zip("tool", "1.0.0", nil))
	t.Setenv("MURMUR_MAX_ARTIFACT_DECOMPRESSED_BYTES", "lots")
	code, _, errOut := runMur(t, "--home", home, "cache", "verify")
	if code != 1 || !strings.HasPrefix(errOut, "mur: invalid-config: ") || !strings.Contains(errOut, "MURMUR_MAX_ARTIFACT_DECOMPRESSED_BYTES") {
		t.Errorf("exit %d, stderr %s", code, errOut)
	}
	if !s.Has(d) {
		t.Error("the artifact was moved to quarantine")
	}
}
