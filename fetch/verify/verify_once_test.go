package verify_test

import (
	"bytes"
	"hash/crc32"
	"os"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/fetch/verify"
	"github.com/murmur-nexus/mur/internal/artifact"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
	"github.com/murmur-nexus/mur/lock"
)

// pin ingests blob as it is and pins it for acme/planted, the way a publisher's bad build would
// have been pinned, and returns its digest.
func (w *verifyWorld) pin(t *testing.T, blob []byte) digest.Digest {
	t.Helper()
	d, err := w.CAS.Ingest(w.ctx, bytes.NewReader(blob), -1, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := lock.Update(w.ctx, w.Proj.LockPath(), func(l *lock.Lock) error {
		return l.Upsert("acme/planted", "1.0.0", "any", d.Encoded(), "", false)
	}); err != nil {
		t.Fatal(err)
	}
	return d
}

// runCounting runs a verify with a repairer that counts the blobs it fetches.
func (w *verifyWorld) runCounting(t *testing.T) (*verify.Report, *pulltest.OpenCounter) {
	t.Helper()
	in := w.input(t)
	store := &pulltest.OpenCounter{Store: w.layout}
	in.Repair = w.repairerOf(store)
	return w.run(t, in), store
}

// verify re-hashes each pinned blob and reads its zip's directory, but decompresses no entry:
// the entries were checked when the blob was admitted (TestImportRefusesAnArtifactWhosePayloadLies
// for cache import; pulls check them before committing), and equal SHA-256 means equal bytes. So a
// lie planted around every admission path, a blob whose payload does not match its CRC-32, is not
// verify's to find: stored, deflated or zstd, it checks out, which it would not if verify read the
// entry (its checks refuse the CRC-32), and it stays in the CAS.
func TestVerifyReadsNoEntryOfABlobThatHashesRight(t *testing.T) {
	t.Parallel()
	wasm := artifacttest.Module(1<<20, 11)
	spec := artifacttest.Spec{Name: "planted", Version: "1.0.0", Wasm: wasm}
	crc, size := crc32.ChecksumIEEE(wasm)^0x80, uint64(len(wasm))
	for name, blob := range map[string][]byte{
		"stored":  spec.Lying(true, crc, size),
		"deflate": spec.Lying(false, crc, size),
		"zstd":    spec.Raw(artifact.MethodZstd, artifacttest.Compress(artifact.MethodZstd, wasm), crc, size),
	} {
		t.Run(name, func(t *testing.T) {
			w := newVerifyWorld(t)
			d := w.pin(t, blob)
			rep := w.run(t, w.input(t))
			// The planted pin was never staged, which verify says (a repair would stage it, and
			// staging reads the payload); of the blobs it says nothing.
			if rep.Blobs != 3 || len(problems(rep, "blob")) != 0 || !w.CAS.Has(d) {
				t.Fatalf("want 3 blobs checked and no blob problem, got %+v", rep)
			}
		})
	}
}

// damageDirectory flips a byte of the zip's end-of-central-directory record, the last 22 bytes
// of an archive without a comment: the directory no longer reads.
func damageDirectory(b []byte) []byte {
	b = append([]byte(nil), b...)
	b[len(b)-22] ^= 0xff
	return b
}

// A zip whose directory is damaged: as the pinned bytes it is not a valid artifact, with no
// fetch; damaged on disk it hashes wrong, so it is moved to quarantine and the repair restores it.
func TestVerifyDamagedZipDirectory(t *testing.T) {
	t.Parallel()
	t.Run("pinned", func(t *testing.T) {
		w := newVerifyWorld(t)
		d := w.pin(t, damageDirectory(artifacttest.Spec{Name: "planted", Version: "1.0.0"}.Zip()))
		rep, store := w.runCounting(t)
		blobs := problems(rep, "blob")
		if len(blobs) != 1 || blobs[0].Repaired || !strings.Contains(blobs[0].Problem, "not a valid artifact") || !strings.Contains(blobs[0].Problem, "not a readable zip") {
			t.Fatalf("a pinned zip with a damaged directory: %+v", rep.Problems)
		}
		if store.Opens.Load() != 0 || !w.CAS.Has(d) {
			t.Fatal("the pinned bytes were fetched again or moved")
		}
	})
	t.Run("on disk", func(t *testing.T) {
		w := newVerifyWorld(t)
		d := w.digests["acme/cat"]
		path := w.CAS.Path(d)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		os.Chmod(path, 0o644)
		if err := os.WriteFile(path, damageDirectory(b), 0o444); err != nil {
			t.Fatal(err)
		}
		rep := w.run(t, w.input(t))
		blobs := problems(rep, "blob")
		if len(blobs) != 1 || !strings.Contains(blobs[0].Problem, "hashes to") || strings.Contains(blobs[0].Problem, "not a valid artifact") {
			t.Fatalf("a blob whose directory was damaged on disk: %+v", rep.Problems)
		}
		if w.CAS.Has(d) || len(w.quarantined(t)) != 1 {
			t.Fatal("the damaged blob was not moved to quarantine")
		}
		rep, store := w.runCounting(t)
		if rep.Unrepaired() != 0 || rep.RepairedCount() != 1 || store.Opens.Load() != 1 {
			t.Fatalf("repair: %+v (%d fetched)", rep.Problems, store.Opens.Load())
		}
		w.mustBeClean(t)
	})
}
