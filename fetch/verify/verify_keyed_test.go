package verify_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/config"
	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/fetch/provenance/sigstore"
	"github.com/murmur-nexus/mur/fetch/publish"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/fetch/verify"
	"github.com/murmur-nexus/mur/lock"
)

func ed25519Key(t *testing.T) (priv []byte, pub string) {
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(k)
	priv = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	if pub, err = sigstore.PublicKeyPEM(priv); err != nil {
		t.Fatal(err)
	}
	return priv, pub
}

// mur verify re-checks a keyed bundle recorded for a per-platform pin: it finds the platform's
// digest, hands the verifier the SHA-512 an Ed25519 signature is over, and reports a recorded
// bundle that speaks for none of the pinned digests, and a lock that records provenance when
// there is no verifier to check it.
func TestVerifyKeyedBundleOfAPlatformPin(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	priv, pub := ed25519Key(t)
	local := &sigstore.Local{}
	sign := func(p pulltest.Packed, priv []byte) (publish.Item, string) {
		path := filepath.Join(t.TempDir(), "grep-1.2.0.mur.zip")
		if err := os.WriteFile(path, p.Zip, 0o644); err != nil {
			t.Fatal(err)
		}
		item, err := publish.FromFile(path, "acme", "linux-x86_64")
		if err != nil {
			t.Fatal(err)
		}
		hint, err := publish.Sign(ctx, local, &item, priv)
		if err != nil {
			t.Fatal(err)
		}
		return item, hint
	}
	p := pulltest.Pack(t, "grep", "1.2.0", 71)
	item, hint := sign(p, priv)
	if !provenance.NeedsSHA512(item.Bundles[0]) {
		t.Fatal("an Ed25519 bundle that is not over a SHA-512")
	}
	st := pulltest.OpenStore(t, "oci-layout:"+filepath.Join(t.TempDir(), "layout"), ocistore.Options{})
	if err := publish.Push(ctx, st, item); err != nil {
		t.Fatal(err)
	}
	policy := func(string) config.ProvenancePolicy {
		return config.ProvenancePolicy{Mode: config.ProvenanceRequire, Trust: provenance.Trust{Keys: []provenance.TrustedKey{{Hint: hint, PEM: pub}}}}
	}
	w := pulltest.NewWorld(t)
	pl := w.Puller(st)
	pl.Provenance.Verifier, pl.Provenance.Policy = local, policy
	w.MustPull(pl, pulltest.Req(grep, "1.2.0"))
	e := w.ReadLock().Find("acme/grep")
	if e.SHA256.Platforms["linux-x86_64"] != p.Digest().Encoded() || e.Provenance == nil || e.Provenance.Kind != lock.ProvenanceKey {
		t.Fatalf("entry %+v", e)
	}

	in := verify.Input{Project: w.Proj, Lock: w.ReadLock(), CAS: w.CAS, Platform: "linux-x86_64", Verifier: local, Policy: policy}
	rep, err := verify.Run(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 0 || len(rep.Provenance) != 1 || rep.Provenance[0].Digest != p.Digest() || rep.Provenance[0].Signer != hint {
		t.Fatalf("report = %+v", rep)
	}

	// No verifier: said, not skipped.
	in.Verifier = nil
	if rep, _ = verify.Run(ctx, in); len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0].Problem, "no verifier to check it") {
		t.Fatalf("no verifier: %+v", rep.Problems)
	}

	// The lock names a bundle held in the CAS for other bytes (an ECDSA one, whose digest
	// says so without verifying it).
	ecPriv, _ := pulltest.ECDSAKey(t)
	other, _ := sign(pulltest.Pack(t, "grep", "1.2.0", 72), ecPriv)
	od := digest.FromBytes(other.Bundles[0])
	if _, err := w.CAS.Ingest(ctx, strings.NewReader(string(other.Bundles[0])), int64(len(other.Bundles[0])), od); err != nil {
		t.Fatal(err)
	}
	l := w.ReadLock()
	rec := *l.Find("acme/grep").Provenance
	rec.Bundle = od.String()
	if err := l.SetProvenance("acme/grep", rec); err != nil {
		t.Fatal(err)
	}
	in.Lock, in.Verifier = l, local
	if rep, _ = verify.Run(ctx, in); len(rep.Provenance) != 0 || len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0].Problem, "speaks for none of its pinned digests") {
		t.Fatalf("a bundle for other bytes: %+v", rep)
	}
}
