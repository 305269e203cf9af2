package provenance_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/internal/errs"
)

// ReadBundle reads a bundle up to MaxBundleSize and refuses a bigger blob by its size alone,
// before hashing it: whatever murmur.lock names as a bundle may be any blob of the CAS.
func TestReadBundleBound(t *testing.T) {
	ctx := context.Background()
	store, err := cas.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ingest := func(b []byte) digest.Digest {
		d, err := store.Ingest(ctx, bytes.NewReader(b), int64(len(b)), digest.FromBytes(b))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	atBound := bytes.Repeat([]byte{'a'}, provenance.MaxBundleSize)
	if got, err := provenance.ReadBundle(ctx, store, ingest(atBound)); err != nil || !bytes.Equal(got, atBound) {
		t.Fatalf("a bundle of exactly the bound: %d bytes, %v", len(got), err)
	}

	over := bytes.Repeat([]byte{'b'}, provenance.MaxBundleSize+1)
	d := ingest(over)
	got, err := provenance.ReadBundle(ctx, store, d)
	if !errors.Is(err, errs.ProvenanceUnverifiable) || got != nil || !strings.Contains(err.Error(), "4194305 bytes, over the 4194304") {
		t.Fatalf("a blob one byte over the bound: %d bytes, %v", len(got), err)
	}

	// Planted bytes that do not hash to their name: refused by size, so never hashed (a hash
	// would have found the damage and quarantined the file).
	planted := digest.FromString("a bundle mur never kept")
	path := store.Path(planted)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, over, 0o444); err != nil {
		t.Fatal(err)
	}
	if _, err := provenance.ReadBundle(ctx, store, planted); !errors.Is(err, errs.ProvenanceUnverifiable) {
		t.Fatalf("a planted oversized blob: %v", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the oversized blob was hashed (and quarantined): %v", err)
	}

	if _, err := provenance.ReadBundle(ctx, store, "sha256:nothex"); !errors.Is(err, errs.InvalidLock) {
		t.Fatalf("a malformed digest: %v", err)
	}
}
