//go:build unix

package sandbox

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
)

// storeAndCache is a CAS and a runner with a compiled cache of its own, in cacheDir.
func storeAndCache(t *testing.T) (*cas.Store, string, *Runner) {
	t.Helper()
	store, err := cas.Open(filepath.Join(t.TempDir(), "cas"))
	if err != nil {
		t.Fatal(err)
	}
	cacheDir := filepath.Join(t.TempDir(), "compiled")
	return store, cacheDir, newRunner(t, Options{CacheDir: cacheDir})
}

// TestEvict: what the compiled cache derives from a blob goes with it, found from the blob's
// payload, and only that.
func TestEvict(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, cacheDir, r := storeAndCache(t)
	doomedWasm, keptWasm := artifacttest.Module(500, 1), artifacttest.Module(500, 2)
	doomed, err := store.Ingest(ctx, bytes.NewReader(artifacttest.Spec{Name: "doomed", Version: "1.0.0", Wasm: doomedWasm}.Zip()), -1, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, wasm := range [][]byte{doomedWasm, keptWasm} {
		if err := r.Precompile(ctx, wasm); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(entryFiles(t, cacheDir)); n != 2 {
		t.Fatalf("%d compiled entries, want 2", n)
	}
	kept := filepath.Join(PayloadDir(cacheDir), doomed.Encoded()+".wasm")
	os.MkdirAll(PayloadDir(cacheDir), 0o700)
	os.WriteFile(kept, doomedWasm, 0o600)

	dry := Evict(ctx, cacheDir, store, doomed, true)
	if len(dry) != 2 || len(entryFiles(t, cacheDir)) != 2 {
		t.Fatalf("dry run: %v; it must remove nothing", dry)
	}
	gone := Evict(ctx, cacheDir, store, doomed, false)
	entry := filepath.Join(versionDir(cacheDir), entryName(doomedWasm, true))
	if len(gone) != 2 || gone[0] != entry || gone[1] != kept {
		t.Fatalf("Evict removed %v, want %s and %s", gone, entry, kept)
	}
	left := entryFiles(t, cacheDir)
	if len(left) != 1 || filepath.Base(left[0]) != entryName(keptWasm, true) {
		t.Fatalf("entries left %v, want only the other module's", left)
	}
	if _, err := os.Stat(kept); !os.IsNotExist(err) {
		t.Fatal("the kept payload stayed")
	}
	// Without a kept copy the payload is inflated from the blob to name the entry.
	r.Precompile(ctx, doomedWasm)
	if gone := Evict(ctx, cacheDir, store, doomed, false); len(gone) != 1 || gone[0] != entry {
		t.Fatalf("Evict without a kept payload removed %v", gone)
	}
}
