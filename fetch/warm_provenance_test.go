package fetch_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/fetch/github/githubtest"
	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/provenance/sigstore/provenancetest"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
)

// Warm keeps the bundle murmur.lock records: it copies it into --layout beside the artifact,
// fetches it again when the CAS holds the blob without it, and fails with provenance-missing
// (or offline) when no place has it, rather than leave a project that verify can't re-check.
func TestWarmKeepsRecordedBundles(t *testing.T) {
	ctx := context.Background()
	w := pulltest.NewProvWorld(t, "GitHub, Inc.")
	w.Attest(t, provenancetest.GoodLeaf(), false)
	w.MustPull(w.Puller(""), pulltest.Req(grep, "1.2.0"))
	bd := digest.Digest(w.ReadLock().Find("acme/grep").Provenance.Bundle) // as GitHub's JSON served it

	layout := pulltest.OpenStore(t, "oci-layout:"+filepath.Join(t.TempDir(), "layout"), ocistore.Options{})
	in := fetch.WarmInput{Project: w.Proj, Lock: w.ReadLock(), Puller: fetch.NewPuller(w.Puller("")), Layout: layout}
	if _, err := fetch.Warm(ctx, in); err != nil {
		t.Fatal(err)
	}
	if found, err := layout.(store.BundleFinder).Bundles(ctx, grep, "1.2.0", w.D); err != nil || len(found) != 1 || digest.FromBytes(found[0]) != bd {
		t.Fatalf("the layout's bundles: %d, %v", len(found), err)
	}

	// The blob without its bundle: warm fetches the bundle.
	if err := os.Remove(w.CAS.Path(bd)); err != nil {
		t.Fatal(err)
	}
	w.Fake.ResetRequests()
	in.Layout = nil
	if _, err := fetch.Warm(ctx, in); err != nil {
		t.Fatal(err)
	}
	if !w.CAS.Has(bd) {
		t.Fatal("warm did not fetch the recorded bundle")
	}
	if n := w.Fake.Count(githubtest.API, "/repos/acme/murmur-artifacts/attestations"); n != 1 {
		t.Fatalf("warm asked for attestations %d times; want 1", n)
	}
	// With the bundle here, warm asks nothing.
	w.Fake.ResetRequests()
	if _, err := fetch.Warm(ctx, in); err != nil || len(w.Fake.Requests()) != 0 {
		t.Fatalf("a warm of a whole cache: %v, %d requests", err, len(w.Fake.Requests()))
	}

	if err := os.Remove(w.CAS.Path(bd)); err != nil {
		t.Fatal(err)
	}
	in.Puller.Pipeline().Offline = true
	if _, err := fetch.Warm(ctx, in); !errors.Is(err, errs.Offline) {
		t.Fatalf("offline without the bundle: %v", err)
	}
	in.Puller.Pipeline().Offline = false
	w.Fake.RemoveAttestations("acme", "murmur-artifacts", w.D.String())
	if _, err := fetch.Warm(ctx, in); !errors.Is(err, errs.ProvenanceMissing) {
		t.Fatalf("no place holds the bundle: %v", err)
	}
	if w.CAS.Has(bd) {
		t.Fatal("a bundle appeared from nowhere")
	}
}
