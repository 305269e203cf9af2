package sandbox

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/internal/artifact"
)

// Evict removes what the compiled cache at cacheDir holds for blob d, as GC removes the blob:
// its kept payload and the compiled module of its payload. It names the compiled entry from the
// payload, read from the kept copy when that is whole, else inflated from the blob, which GC
// calls it before removing. It returns the paths it removed (with dryRun, those it would); what it
// can't read or remove stays, since the compiled cache is only a cache.
func Evict(ctx context.Context, cacheDir string, store *cas.Store, d digest.Digest, dryRun bool) []string {
	var gone []string
	drop := func(p string) {
		if _, err := os.Lstat(p); err != nil {
			return
		}
		if !dryRun {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return
			}
		}
		gone = append(gone, p)
	}
	kept := filepath.Join(PayloadDir(cacheDir), d.Encoded()+".wasm")
	if dir := versionDir(cacheDir); dir != "" {
		if name := entryOf(ctx, store, d, kept); name != "" {
			drop(filepath.Join(dir, name))
		}
	}
	drop(kept)
	drop(blobKeyPath(cacheDir, d))
	return gone
}

// entryOf is the compiled entry's name of blob d's payload, "" for a component (never compiled)
// or a blob that can't be read. The payload is hashed from the kept copy when that is whole, else
// as it is decompressed from the blob, never held in memory.
func entryOf(ctx context.Context, store *cas.Store, d digest.Digest, kept string) string {
	a, blob, err := artifact.OpenBlob(store.ReaderAt(ctx, d))
	if err != nil {
		return ""
	}
	defer blob.Close()
	if a.Component {
		return ""
	}
	if b, ok := mapKept(kept, a); ok {
		return entryName(b, true)
	}
	h := newModuleKey(true)
	if _, err := a.CopyPayload(h); err != nil {
		return ""
	}
	return entryNameOf(h.Sum(nil))
}
