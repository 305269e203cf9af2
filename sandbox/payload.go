package sandbox

import (
	"context"
	"errors"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/internal/artifact"
	"github.com/murmur-nexus/mur/internal/atomicfile"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
)

// Kept payloads: a payload inflated from its blob is kept in the compiled cache's payloads/
// folder, named by the blob's digest, so that a warm start need not inflate it again. A kept
// payload is used only when its size and CRC-32 match what the verified zip records for it; the
// folder is trusted exactly as the compiled code beside it is, and deleting it is always safe.

// LoadPayload reads the pinned blob d from the CAS, verifies all of it, and returns its payload:
// never the copy staged in tools/. A damaged blob is quarantined by the CAS. payloadDir, when not
// "", keeps inflated payloads (see PayloadDir).
func LoadPayload(ctx context.Context, store *cas.Store, d digest.Digest, payloadDir string) ([]byte, *artifact.Archive, error) {
	a, blob, err := artifact.OpenBlob(store.VerifiedReaderAt(ctx, d))
	if err != nil {
		return nil, nil, err
	}
	defer blob.Close()
	store.Touch(d)
	if payloadDir != "" && !a.Component {
		kept := filepath.Join(payloadDir, d.Encoded()+".wasm")
		if b, ok := mapKept(kept, a); ok {
			return b, a, nil
		}
		// Decompressed straight into the kept file and mapped from there, never held on the
		// heap whole. Best effort: a payload that can't be kept is mapped from a file of its own
		// below, and one a crash lost or cut short fails its CRC-32 check and is decompressed
		// again next time.
		if atomicfile.MkdirPrivate(payloadDir) == nil {
			err := atomicfile.WriteCacheFrom(kept, 0o600, func(w io.Writer) error {
				_, err := a.CopyPayload(w)
				return err
			})
			if errs.TokenOf(err) == errs.InvalidArtifact {
				return nil, nil, err
			}
			if b, ok := mapKept(kept, a); ok {
				return b, a, nil
			}
		}
	}
	// The mapping lives as long as the process, which for `mur run` is one run.
	wasm, _, err := a.MapPayload(store.TempDir())
	if err != nil {
		return nil, nil, err
	}
	return wasm, a, nil
}

// mapKept maps the kept payload at p when it is the one a describes. The mapping lives as long as
// the process, which for `mur run` is one run.
func mapKept(p string, a *artifact.Archive) ([]byte, bool) {
	f, err := os.Open(p)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != a.PayloadSize {
		return nil, false
	}
	b, unmap, err := atomicfile.Map(f, fi.Size())
	if err != nil {
		return nil, false
	}
	if crc32.ChecksumIEEE(b) != a.PayloadCRC32() {
		unmap()
		return nil, false
	}
	return b, true
}

// PayloadDir is the folder of kept payloads inside the compiled cache cacheDir.
func PayloadDir(cacheDir string) string { return filepath.Join(cacheDir, "payloads") }

// PrunePayloads removes the kept payloads and remembered keys (blobkey.go) in the compiled cache
// cacheDir whose blob store no longer holds, or that gc (whose report is gc) removed, and returns
// their paths: a kept payload goes with its blob. With dryRun it only lists them; the blobs a dry-run gc would remove are
// still there, and count as gone. It is the whole of what `mur cache gc` does to kept payloads.
func PrunePayloads(cacheDir string, store *cas.Store, gc cas.GCReport, dryRun bool) ([]string, error) {
	removed := map[digest.Digest]bool{}
	for _, b := range gc.Blobs {
		removed[b.Digest] = true
	}
	has := func(d digest.Digest) bool { return store.Has(d) && !removed[d] }
	payloadDir := PayloadDir(cacheDir)
	ents, err := os.ReadDir(payloadDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, errs.Wrap(err, errs.IO, "can't list %s: %v", payloadDir, err)
	}
	var gone []string
	for _, e := range ents {
		hex, ok := strings.CutSuffix(e.Name(), ".wasm")
		if !ok {
			hex, ok = strings.CutSuffix(e.Name(), blobKeySuffix) // a remembered key (blobkey.go)
		}
		d, err := ref.DigestFromHex(hex)
		if ok && err == nil && has(d) {
			continue
		}
		p := filepath.Join(payloadDir, e.Name())
		if !dryRun {
			if err := os.RemoveAll(p); err != nil {
				return gone, errs.Wrap(err, errs.IO, "can't remove %s: %v", p, err)
			}
		}
		gone = append(gone, p)
	}
	return gone, nil
}
