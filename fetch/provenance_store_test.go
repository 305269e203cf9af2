package fetch_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"testing"

	"github.com/murmur-nexus/mur/fetch/config"
	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/fetch/provenance/sigstore"
	"github.com/murmur-nexus/mur/fetch/publish"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/lock"
)

func ecdsaKey(t *testing.T) (priv []byte, pub string) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(k)
	priv = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	pub, err = sigstore.PublicKeyPEM(priv)
	if err != nil {
		t.Fatal(err)
	}
	return priv, pub
}

// signedGrep packs acme/grep@1.2.0 from seed and signs it with a fresh P-256 key, as mur push
// --sign-key does: the packed artifact, the item to push, the local verifier that checks it, and
// the key's hint and public PEM for trusted_keys.
func signedGrep(t *testing.T, seed uint64) (packed, publish.Item, *sigstore.Local, string, string) {
	t.Helper()
	p := pack(t, "grep", "1.2.0", seed)
	path := t.TempDir() + "/grep-1.2.0.mur.zip"
	writeFile(t, path, p.zip)
	item, err := publish.FromFile(path, "acme", "any")
	if err != nil {
		t.Fatal(err)
	}
	priv, pub := ecdsaKey(t)
	local := &sigstore.Local{}
	hint, err := publish.Sign(context.Background(), local, &item, priv)
	if err != nil {
		t.Fatal(err)
	}
	return p, item, local, hint, pub
}

// A team store: a keyed bundle pushed as an OCI referrer (the sha256-<hex> fallback tag on a
// registry without the referrers API; an index.json entry in a layout) is found by the
// manifest's digest and verified against trusted_keys; the write-through mirror copies it.
func TestKeyedBundleThroughRegistryReferrers(t *testing.T) {
	for _, kind := range []string{"registry", "layout"} {
		t.Run(kind, func(t *testing.T) {
			st := openStore(t, storeAddr(t, kind), ocistore.Options{})
			keyedBundleThroughReferrers(t, st, func() store.Store { return openStore(t, storeAddr(t, kind), ocistore.Options{}) })
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
	p, item, local, hint, pub := signedGrep(t, 19)
	if err := publish.Push(context.Background(), st, item); err != nil {
		t.Fatal(err)
	}
	found, err := st.(store.BundleFinder).Bundles(context.Background(), grep, "1.2.0", p.digest())
	if err != nil || len(found) != 1 {
		t.Fatalf("Bundles = %d, %v", len(found), err)
	}

	w := newWorld(t)
	pl := w.puller(st)
	pl.Provenance.Verifier = local
	pl.Provenance.Policy = func(string) config.ProvenancePolicy {
		return config.ProvenancePolicy{Mode: config.ProvenanceRequire, Trust: provenance.Trust{Keys: []provenance.TrustedKey{{Hint: hint, PEM: pub}}}}
	}
	w.mustPull(pl, req(grep, "1.2.0"))
	e := w.readLock().Find("acme/grep")
	if e.Provenance == nil || e.Provenance.Kind != lock.ProvenanceKey || e.Provenance.Signer != hint {
		t.Fatalf("provenance = %+v", e.Provenance)
	}

	// Another key under no trusted_keys entry: unverifiable, nothing written.
	w2 := newWorld(t)
	pl2 := w2.puller(st)
	pl2.Provenance.Verifier = local
	pl2.Provenance.Policy = func(string) config.ProvenancePolicy { return config.ProvenancePolicy{Mode: config.ProvenanceRequire} }
	before := w2.state()
	if _, err := w2.pull(pl2, req(grep, "1.2.0")); !errors.Is(err, errs.ProvenanceUnverifiable) {
		t.Fatalf("untrusted key: %v", err)
	}
	w2.assertUnchanged(before)

	// The write-through mirror copies the bundle with the artifact: a pull from the mirror alone
	// finds it.
	mirror := newMirror()
	w3 := newWorld(t)
	pl3 := w3.puller(st)
	pl3.Provenance.Verifier, pl3.Provenance.Policy, pl3.Mirror.Store = local, pl.Provenance.Policy, mirror
	w3.mustPull(pl3, req(grep, "1.2.0"))
	if found, err := mirror.(store.BundleFinder).Bundles(context.Background(), grep, "1.2.0", p.digest()); err != nil || len(found) != 1 {
		t.Fatalf("mirror bundles = %d, %v", len(found), err)
	}
}

func writeFile(t *testing.T, path string, data []byte) {
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
