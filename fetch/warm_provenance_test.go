package fetch_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/fetch/config"
	"github.com/murmur-nexus/mur/fetch/github/githubtest"
	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/fetch/provenance/sigstore/provenancetest"
	"github.com/murmur-nexus/mur/fetch/publish"
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

// Warm fetches the bundle murmur.lock records, by its digest: a place that serves another bundle
// for the same bytes (one that would verify as well, minted later) does not stand in for it, in
// the CAS or in --layout, since verify holds the lock's record to that very bundle.
func TestWarmTakesOnlyTheRecordedBundle(t *testing.T) {
	ctx := context.Background()
	w := pulltest.NewProvWorld(t, "GitHub, Inc.")
	w.Attest(t, provenancetest.GoodLeaf(), true)
	w.MustPull(w.Puller(""), pulltest.Req(grep, "1.2.0"))
	bd := digest.Digest(w.ReadLock().Find("acme/grep").Provenance.Bundle)
	recorded, err := os.ReadFile(w.CAS.Path(bd))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(w.CAS.Path(bd)); err != nil {
		t.Fatal(err)
	}
	w.Fake.RemoveAttestations("acme", "murmur-artifacts", w.D.String())
	other := digest.FromBytes(w.Attest(t, provenancetest.GoodLeaf(), true))
	if other == bd {
		t.Fatal("the second attestation is the first")
	}

	in := fetch.WarmInput{Project: w.Proj, Lock: w.ReadLock(), Puller: fetch.NewPuller(w.Puller(""))}
	if _, err := fetch.Warm(ctx, in); !errors.Is(err, errs.ProvenanceMissing) {
		t.Fatalf("only another bundle served: %v", err)
	}
	if w.CAS.Has(other) || w.CAS.Has(bd) {
		t.Fatalf("warm kept a bundle: other %v, recorded %v", w.CAS.Has(other), w.CAS.Has(bd))
	}

	// Both served, the other first: warm keeps the recorded one, and copies only it.
	w.Fake.AddAttestation("acme", "murmur-artifacts", w.D.String(), recorded, true)
	layout := pulltest.OpenStore(t, "oci-layout:"+filepath.Join(t.TempDir(), "layout"), ocistore.Options{})
	in.Layout = layout
	if _, err := fetch.Warm(ctx, in); err != nil {
		t.Fatal(err)
	}
	if !w.CAS.Has(bd) || w.CAS.Has(other) {
		t.Fatalf("the CAS after warm: recorded %v, other %v", w.CAS.Has(bd), w.CAS.Has(other))
	}
	found, err := layout.(store.BundleFinder).Bundles(ctx, grep, "1.2.0", w.D)
	if err != nil || len(found) != 1 || digest.FromBytes(found[0]) != bd {
		t.Fatalf("the layout's bundles: %d, %v", len(found), err)
	}
}

// A store that carries the bundle beside the artifact (a team registry, a layout) is asked for it
// as a source is: warm puts the recorded bundle back from there.
func TestWarmFetchesTheRecordedBundleFromAStore(t *testing.T) {
	ctx := context.Background()
	_, item, local, hint, pub := pulltest.SignedGrep(t, 81)
	st := pulltest.OpenStore(t, "oci-layout:"+filepath.Join(t.TempDir(), "layout"), ocistore.Options{})
	if err := publish.Push(ctx, st, item); err != nil {
		t.Fatal(err)
	}
	w := newWorld(t)
	pl := w.puller(st)
	pl.Pipeline().Provenance.Verifier = local
	pl.Pipeline().Provenance.Policy = func(string) config.ProvenancePolicy {
		return config.ProvenancePolicy{Mode: config.ProvenanceRequire, Trust: provenance.Trust{Keys: []provenance.TrustedKey{{Hint: hint, PEM: pub}}}}
	}
	w.mustPull(pl, pulltest.Req(grep, "1.2.0"))
	bd := digest.Digest(w.ReadLock().Find("acme/grep").Provenance.Bundle)
	if bd != digest.FromBytes(item.Bundles[0]) {
		t.Fatalf("recorded bundle %s", bd)
	}
	if err := os.Remove(w.CAS.Path(bd)); err != nil {
		t.Fatal(err)
	}
	if _, err := fetch.Warm(ctx, fetch.WarmInput{Project: w.Proj, Lock: w.ReadLock(), Puller: pl}); err != nil {
		t.Fatal(err)
	}
	if !w.CAS.Has(bd) {
		t.Fatal("warm did not fetch the recorded bundle from the store")
	}
}
