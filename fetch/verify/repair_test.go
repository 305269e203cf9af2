package verify_test

import (
	"archive/zip"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/github/githubtest"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/fetch/verify"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
	"github.com/murmur-nexus/mur/lock"
)

// readFails makes the blob d fail every read while it still looks present: a symlink to
// /proc/self/mem (whose reads at offset 0 fail with EIO, as a bad sector's do), which every read
// of a blob now refuses before reading through it.
func readFails(t *testing.T, w *verifyWorld, d digest.Digest) {
	t.Helper()
	path := w.CAS.Path(d)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/proc/self/mem", path); err != nil {
		t.Fatal(err)
	}
	if !w.CAS.Has(d) || w.CAS.Verify(w.ctx, d) == nil {
		t.Skip("this system reads /proc/self/mem at offset 0")
	}
}

// "(repaired)" only once the repaired blob checks out again: a blob that can't be read is moved
// aside and fetched again, rather than found present and called repaired.
func TestRepairOfAnUnreadableBlob(t *testing.T) {
	t.Parallel()
	w := newVerifyWorld(t)
	d := w.digests["acme/grep"]
	readFails(t, w, d)
	rep := w.run(t, w.input(t))
	if blobs := problems(rep, "blob"); len(blobs) != 1 || blobs[0].Repaired || !strings.Contains(blobs[0].Problem, "is a symlink, not a regular file") {
		t.Fatalf("an unreadable blob: %+v", rep.Problems)
	}
	in := w.input(t)
	in.Repair = w.repairer()
	rep = w.run(t, in)
	if blobs := problems(rep, "blob"); len(blobs) != 1 || !blobs[0].Repaired || rep.Err(true) != nil {
		t.Fatalf("repair of an unreadable blob: %+v", rep.Problems)
	}
	if err := w.CAS.Verify(w.ctx, d); err != nil {
		t.Fatalf("reported repaired, but the blob still fails: %v", err)
	}
	w.mustBeClean(t)
}

// A repair whose fetch succeeds but whose blob still does not check out is not repaired.
func TestRepairIsCheckedAgain(t *testing.T) {
	t.Parallel()
	w := newVerifyWorld(t)
	d := w.digests["acme/grep"]
	os.Remove(w.CAS.Path(d))
	in := w.input(t)
	rp := w.repairer()
	// Right after the blob is committed, the disk gives way under it.
	rp.Compile.Precompile = func(ctx context.Context, wasm []byte) error {
		os.Remove(w.CAS.Path(d))
		os.Symlink("/proc/self/mem", w.CAS.Path(d))
		return nil
	}
	in.Repair = rp
	rep := w.run(t, in)
	blobs := problems(rep, "blob")
	if len(blobs) != 1 || blobs[0].Repaired || !strings.Contains(blobs[0].Problem, "still does not check out") {
		t.Fatalf("a repair whose blob fails again: %+v", rep.Problems)
	}
}

// noManifest is a zip of wasm alone: it reads, but as no packed artifact.
func noManifest(t *testing.T, wasm []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	f, err := zw.Create("capsule.wasm")
	if err != nil {
		t.Fatal(err)
	}
	f.Write(wasm)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// A blob that hashes to its name but is not a valid artifact is named as such, with the reason,
// and no repair is attempted: the pinned bytes are what is wrong.
func TestPlantedBlobIsNotAnArtifact(t *testing.T) {
	t.Parallel()
	wasm := artifacttest.Module(1000, 7)
	for name, c := range map[string]struct {
		blob   []byte
		reason string
	}{
		"not a zip": {[]byte("planted by hand, not a zip"), "not a readable zip"},
		// A payload that is not what its zip records is refused where a blob is admitted
		// (TestImportRefusesAnArtifactWhosePayloadLies); verify reads no entry.
		"no murmur.yaml": {noManifest(t, wasm), "no murmur.yaml"},
	} {
		t.Run(name, func(t *testing.T) {
			w := newVerifyWorld(t)
			d, err := w.CAS.Ingest(w.ctx, bytes.NewReader(c.blob), -1, "")
			if err != nil {
				t.Fatal(err)
			}
			lock.Update(w.ctx, w.Proj.LockPath(), func(l *lock.Lock) error {
				return l.Upsert("acme/planted", "1.0.0", "any", d.Encoded(), "", false)
			})
			in := w.input(t)
			store := &pulltest.OpenCounter{Store: w.layout}
			in.Repair = w.repairerOf(store)
			rep := w.run(t, in)
			blobs := problems(rep, "blob")
			if len(blobs) != 1 || blobs[0].Repaired || !strings.Contains(blobs[0].Problem, "not a valid artifact") ||
				!strings.Contains(blobs[0].Problem, c.reason) || !strings.Contains(blobs[0].Problem, "--update") {
				t.Fatalf("a planted blob: %+v", rep.Problems)
			}
			if store.Opens.Load() != 0 {
				t.Fatal("the repair fetched bytes that can only be the same invalid ones")
			}
			if !w.CAS.Has(d) {
				t.Fatal("the planted blob went; it hashes right and is what the lock pins")
			}
		})
	}
}

// TestRepairNeverThroughASymlink: verify reports a tools/<scope> that is a symlink, and
// --repair leaves it, and what it points at, alone instead of removing and restaging there.
func TestRepairNeverThroughASymlink(t *testing.T) {
	t.Parallel()
	w := newVerifyWorld(t)
	scopeDir := filepath.Join(w.Proj.ToolsDir(), "acme")
	outside := filepath.Join(t.TempDir(), "acme")
	if err := os.Rename(scopeDir, outside); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "grep", "capsule.wasm"), []byte("someone else's file"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, scopeDir); err != nil {
		t.Fatal(err)
	}
	before := pulltest.TreeDigest(t, outside)
	in := w.input(t)
	in.Repair = w.repairer()
	rep := w.run(t, in)
	tools := problems(rep, "tools")
	if len(tools) != 2 || rep.RepairedCount() != 0 {
		t.Fatalf("want two unrepaired tools problems, got %+v", rep.Problems)
	}
	for _, p := range tools {
		if !strings.Contains(p.Problem, scopeDir+" is a symlink to "+outside) {
			t.Errorf("the problem does not name the symlink and its target: %s", p.Problem)
		}
	}
	if after := pulltest.TreeDigest(t, outside); after != before {
		t.Errorf("--repair changed the symlink's target:\n--- before\n%s\n--- after\n%s", before, after)
	}
}

// GitHub owners are case-insensitive: with github:acme/tools pinned and github:Acme/tools
// configured, the pull accepts the source, and verify agrees with it instead of reporting a pin.
func TestPullAndVerifyAgreeOnTheOwnersCase(t *testing.T) {
	t.Parallel()
	w := pulltest.NewWorld(t)
	lock.Update(context.Background(), w.Proj.LockPath(), func(l *lock.Lock) error {
		return l.SetPin("acme", lock.ScopePin{Source: "github:acme/tools", OwnerID: 1, RepoID: 42})
	})
	src := &pulltest.FakeSource{Source: "github:Acme/tools", Owner: 1, Version: "1.2.0", Zip: githubtest.PackArtifact("grep", "1.2.0")}
	p := w.Puller()
	p.Source = src
	if _, err := w.Pull(p, pulltest.Req(grep, "1.2.0")); err != nil {
		t.Fatalf("the pull refused a source that differs from the pin only in the owner's case: %v", err)
	}
	rep, err := verify.Run(context.Background(), verify.Input{Project: w.Proj, Lock: w.ReadLock(), CAS: w.CAS,
		SourceFor: func(string) string { return src.Source }})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 0 {
		t.Fatalf("verify disagrees with the pull: %+v", rep.Problems)
	}
}
