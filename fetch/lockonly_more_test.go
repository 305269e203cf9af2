package fetch_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/fetch/config"
	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/fetch/publish"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/lock"
)

// mur lock records the provenance it verified from metadata, as a pull records it: the bundle,
// its kind and its signer, with the bundle kept in the CAS.
func TestLockRecordsTheProvenanceItVerified(t *testing.T) {
	ctx := context.Background()
	p, item, local, hint, pub := pulltest.SignedGrep(t, 91)
	st := pulltest.OpenStore(t, "oci-layout:"+filepath.Join(t.TempDir(), "layout"), ocistore.Options{})
	if err := publish.Push(ctx, st, item); err != nil {
		t.Fatal(err)
	}
	w := newWorld(t)
	in := intentOf(t, w, "name: app\nartifacts:\n  - name: acme/grep\n    version: 1.2.0\n")
	pl := w.puller(st)
	pl.Pipeline().Provenance.Verifier = local
	pl.Pipeline().Provenance.Policy = func(string) config.ProvenancePolicy {
		return config.ProvenancePolicy{Mode: config.ProvenanceRequire, Trust: provenance.Trust{Keys: []provenance.TrustedKey{{Hint: hint, PEM: pub}}}}
	}
	if _, err := pl.LockProject(ctx, w.Proj, in, declaredReqs(in), fetch.LockOptions{}); err != nil {
		t.Fatal(err)
	}
	bd := digest.FromBytes(item.Bundles[0])
	e := w.ReadLock().Find("acme/grep")
	if e == nil || e.Provenance == nil || *e.Provenance != (lock.Provenance{Kind: lock.ProvenanceKey, Bundle: bd.String(), Signer: hint}) {
		t.Fatalf("entry %+v", e)
	}
	if !w.CAS.Has(bd) || w.CAS.Has(p.Digest()) {
		t.Fatalf("the CAS after mur lock: bundle %v, payload %v (want the bundle only)", w.CAS.Has(bd), w.CAS.Has(p.Digest()))
	}
}

// An entry that pins per platform gets a store's "any" payload under the platform locked for,
// as a pull pins it, so that the other platforms' pins keep their meaning.
func TestLockPinsAnyPayloadPerPlatform(t *testing.T) {
	st := pulltest.LayoutStore(t)
	anyP, arm := pulltest.Pack(t, "grep", "1.2.0", 92), pulltest.Pack(t, "grep", "1.2.0", 93)
	pulltest.Push(t, st, grep, "1.2.0", "any", anyP)
	w := newWorld(t)
	w.PinAll([]pulltest.Pin{{Name: "acme/grep", Version: "1.2.0", Platform: "linux-aarch64", Blob: arm.Zip}})
	in := intentOf(t, w, "name: app\nartifacts:\n  - name: acme/grep\n    version: 1.2.0\n")
	if _, err := w.puller(st).LockProject(context.Background(), w.Proj, in, declaredReqs(in), fetch.LockOptions{}); err != nil {
		t.Fatal(err)
	}
	e := w.ReadLock().Find("acme/grep")
	want := map[string]string{"linux-aarch64": arm.Digest().Encoded(), "linux-x86_64": anyP.Digest().Encoded()}
	if e.SHA256.Any != "" || fmt.Sprint(e.SHA256.Platforms) != fmt.Sprint(want) {
		t.Fatalf("entry %+v; want platforms %v", e.SHA256, want)
	}
}
