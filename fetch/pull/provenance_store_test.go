package pull_test

import (
	"context"
	"errors"
	"testing"

	"github.com/murmur-nexus/mur/fetch/config"
	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/fetch/publish"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/lock"
)

// A team store: a keyed bundle pushed as an OCI referrer (the sha256-<hex> fallback tag on a
// registry without the referrers API; an index.json entry in a layout) is found by the
// manifest's digest and verified against trusted_keys; the write-through mirror copies it.
func TestKeyedBundleThroughRegistryReferrers(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"registry", "layout"} {
		t.Run(kind, func(t *testing.T) {
			st := pulltest.OpenStore(t, storeAddr(t, kind), ocistore.Options{})
			keyedBundleThroughReferrers(t, st, func() store.Store { return pulltest.OpenStore(t, storeAddr(t, kind), ocistore.Options{}) })
		})
	}
}

func storeAddr(t *testing.T, kind string) string {
	if kind == "layout" {
		return "oci-layout:" + t.TempDir()
	}
	return "oci://" + registrytest.Start(t).Addr() + "/murmur"
}

func keyedBundleThroughReferrers(t *testing.T, st store.Store, newMirror func() store.Store) {
	p, item, local, hint, pub := pulltest.SignedGrep(t, 19)
	if err := publish.Push(context.Background(), st, item); err != nil {
		t.Fatal(err)
	}
	found, err := st.(store.BundleFinder).Bundles(context.Background(), grep, "1.2.0", p.Digest())
	if err != nil || len(found) != 1 {
		t.Fatalf("Bundles = %d, %v", len(found), err)
	}

	w := pulltest.NewWorld(t)
	pl := w.Puller(st)
	pl.Provenance.Verifier = local
	pl.Provenance.Policy = func(string) config.ProvenancePolicy {
		return config.ProvenancePolicy{Mode: config.ProvenanceRequire, Trust: provenance.Trust{Keys: []provenance.TrustedKey{{Hint: hint, PEM: pub}}}}
	}
	w.MustPull(pl, pulltest.Req(grep, "1.2.0"))
	e := w.ReadLock().Find("acme/grep")
	if e.Provenance == nil || e.Provenance.Kind != lock.ProvenanceKey || e.Provenance.Signer != hint {
		t.Fatalf("provenance = %+v", e.Provenance)
	}

	// Another key under no trusted_keys entry: unverifiable, nothing written.
	w2 := pulltest.NewWorld(t)
	pl2 := w2.Puller(st)
	pl2.Provenance.Verifier = local
	pl2.Provenance.Policy = func(string) config.ProvenancePolicy { return config.ProvenancePolicy{Mode: config.ProvenanceRequire} }
	before := w2.State()
	if _, err := w2.Pull(pl2, pulltest.Req(grep, "1.2.0")); !errors.Is(err, errs.ProvenanceUnverifiable) {
		t.Fatalf("untrusted key: %v", err)
	}
	w2.AssertUnchanged(before)

	// The write-through mirror copies the bundle with the artifact: a pull from the mirror alone
	// finds it.
	mirror := newMirror()
	w3 := pulltest.NewWorld(t)
	pl3 := w3.Puller(st)
	pl3.Provenance.Verifier, pl3.Provenance.Policy, pl3.Mirror.Store = local, pl.Provenance.Policy, mirror
	w3.MustPull(pl3, pulltest.Req(grep, "1.2.0"))
	if found, err := mirror.(store.BundleFinder).Bundles(context.Background(), grep, "1.2.0", p.Digest()); err != nil || len(found) != 1 {
		t.Fatalf("mirror bundles = %d, %v", len(found), err)
	}
}
