package fetch_test

import (
	"bytes"
	"hash/crc32"
	"os"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/fetch/pull"
	fstore "github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
	"github.com/murmur-nexus/mur/lock"
)

// pin ingests blob as it is and pins it for acme/planted, the way a publisher's bad build would
// have been pinned, and returns its digest.
func (w *verifyWorld) pin(t *testing.T, blob []byte) digest.Digest {
	t.Helper()
	d, err := w.cas.Ingest(w.ctx, bytes.NewReader(blob), -1, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := lock.Update(w.ctx, w.proj.LockPath(), func(l *lock.Lock) error {
		return l.Upsert("acme/planted", "1.0.0", "any", d.Encoded(), "", false)
	}); err != nil {
		t.Fatal(err)
	}
	return d
}

// runCounting runs a verify with a repairer that counts the blobs it fetches.
func (w *verifyWorld) runCounting(t *testing.T) (*fetch.VerifyReport, *openCounter) {
	t.Helper()
	in := w.input(t)
	store := &openCounter{Store: w.layout}
	in.Repair = &fetch.Puller{Puller: &pull.Puller{CAS: w.cas, Stores: []fstore.Store{store}}}
	return w.run(t, in), store
}

// A blob that hashes right, whose large deflated payload inflates to the size its zip records but
// not to the CRC-32: the one pass that hashes it inflates it too and finds that. The pinned bytes
// are what is wrong, so nothing is fetched and nothing is moved.
func TestVerifyFindsAPayloadCRCTheHashCannot(t *testing.T) {
	wasm := artifacttest.Module(3<<20, 11)
	w := newVerifyWorld(t)
	d := w.pin(t, artifacttest.Spec{Name: "planted", Version: "1.0.0", Wasm: wasm}.Lying(false, crc32.ChecksumIEEE(wasm)^0x80, uint64(len(wasm))))
	rep, store := w.runCounting(t)
	blobs := problems(rep, "blob")
	if len(blobs) != 1 || blobs[0].Repaired || blobs[0].Subject != "acme/planted "+d.String() {
		t.Fatalf("want one blob problem for acme/planted, got %+v", rep.Problems)
	}
	for _, want := range []string{"hashes right", `payload "capsule.wasm"`, "checksum crc32:", "--update"} {
		if !strings.Contains(blobs[0].Problem, want) {
			t.Errorf("the problem does not say %q: %s", want, blobs[0].Problem)
		}
	}
	if store.opens.Load() != 0 || !w.cas.Has(d) {
		t.Fatalf("a blob that hashes right was fetched again (%d) or moved (present: %v)", store.opens.Load(), w.cas.Has(d))
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
	t.Run("pinned", func(t *testing.T) {
		w := newVerifyWorld(t)
		d := w.pin(t, damageDirectory(artifacttest.Spec{Name: "planted", Version: "1.0.0"}.Zip()))
		rep, store := w.runCounting(t)
		blobs := problems(rep, "blob")
		if len(blobs) != 1 || blobs[0].Repaired || !strings.Contains(blobs[0].Problem, "not a valid artifact") || !strings.Contains(blobs[0].Problem, "not a readable zip") {
			t.Fatalf("a pinned zip with a damaged directory: %+v", rep.Problems)
		}
		if store.opens.Load() != 0 || !w.cas.Has(d) {
			t.Fatal("the pinned bytes were fetched again or moved")
		}
	})
	t.Run("on disk", func(t *testing.T) {
		w := newVerifyWorld(t)
		d := w.digests["acme/cat"]
		path := w.cas.Path(d)
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
		if w.cas.Has(d) || len(w.quarantined(t)) != 1 {
			t.Fatal("the damaged blob was not moved to quarantine")
		}
		rep, store := w.runCounting(t)
		if rep.Unrepaired() != 0 || rep.RepairedCount() != 1 || store.opens.Load() != 1 {
			t.Fatalf("repair: %+v (%d fetched)", rep.Problems, store.opens.Load())
		}
		w.mustBeClean(t)
	})
}
