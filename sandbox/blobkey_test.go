//go:build unix

package sandbox

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
)

// A remembered key comes back as it was given; a torn, overlong, non-hex or symlinked one is no
// key at all, and a runner without a compiled cache remembers nothing.
func TestBlobKeyRoundTripAndHostileFiles(t *testing.T) {
	t.Parallel()
	cacheDir := filepath.Join(t.TempDir(), "compiled")
	r := newRunner(t, Options{CacheDir: cacheDir})
	d := digest.FromString("blob")
	if _, ok := r.BlobKey(d); ok {
		t.Fatal("a key for a blob never seen")
	}
	key := bytes.Repeat([]byte{0xab}, keySize)
	r.RememberBlobKey(d, key)
	if got, ok := r.BlobKey(d); !ok || !bytes.Equal(got, key) {
		t.Fatalf("BlobKey = %x, %v; want %x", got, ok, key)
	}
	r.RememberBlobKey(d, key[:5]) // not a key: ignored
	if got, ok := r.BlobKey(d); !ok || !bytes.Equal(got, key) {
		t.Fatalf("a short key replaced the remembered one: %x, %v", got, ok)
	}
	p := blobKeyPath(cacheDir, d)
	other := filepath.Join(t.TempDir(), "elsewhere")
	os.WriteFile(other, []byte(strings.Repeat("cd", keySize)), 0o600)
	for name, plant := range map[string]func() error{
		"torn":     func() error { return os.WriteFile(p, []byte(strings.Repeat("ab", keySize-1)), 0o600) },
		"overlong": func() error { return os.WriteFile(p, []byte(strings.Repeat("ab", keySize)+"\n"), 0o600) },
		"not hex":  func() error { return os.WriteFile(p, []byte(strings.Repeat("zz", keySize)), 0o600) },
		"symlink":  func() error { os.Remove(p); return os.Symlink(other, p) },
		"fifo":     func() error { os.Remove(p); return syscall.Mkfifo(p, 0o600) },
	} {
		if err := plant(); err != nil {
			t.Fatal(err)
		}
		if got, ok := r.BlobKey(d); ok {
			t.Errorf("%s: BlobKey = %x, want none", name, got)
		}
		os.Remove(p)
	}
	os.Symlink(other, p)
	r.RememberBlobKey(d, key)
	if b, _ := os.ReadFile(other); string(b) != strings.Repeat("cd", keySize) {
		t.Fatal("remembering a key wrote through a symlink")
	}
	os.Remove(p)
	syscall.Mkfifo(p, 0o600)
	r.RememberBlobKey(d, key) // must return, not wait for a reader
	os.Remove(p)
	bare := newRunner(t, Options{})
	bare.RememberBlobKey(d, key)
	if _, ok := bare.BlobKey(d); ok {
		t.Fatal("a runner without a compiled cache remembered a key")
	}
}

// A remembered key goes with its blob: gc's prune and Evict remove it, and keep the others'.
func TestBlobKeyGoesWithItsBlob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, cacheDir, r := storeAndCache(t)
	keep, _ := store.Ingest(ctx, strings.NewReader("keep"), -1, "")
	doomed, _ := store.Ingest(ctx, strings.NewReader("doomed"), -1, "")
	key := bytes.Repeat([]byte{1}, keySize)
	for _, d := range []digest.Digest{keep, doomed} {
		r.RememberBlobKey(d, key)
	}
	gc := cas.GCReport{Blobs: []cas.RemovedBlob{{BlobInfo: cas.BlobInfo{Digest: doomed}}}}
	if gone, err := PrunePayloads(cacheDir, store, gc, false); err != nil || len(gone) != 1 || gone[0] != blobKeyPath(cacheDir, doomed) {
		t.Fatalf("prune removed %v (%v), want only the doomed blob's key", gone, err)
	}
	if _, ok := r.BlobKey(keep); !ok {
		t.Fatal("prune removed the key of a blob the CAS holds")
	}
	Evict(ctx, cacheDir, store, keep, false)
	if _, ok := r.BlobKey(keep); ok {
		t.Fatal("Evict left the blob's remembered key")
	}
}
