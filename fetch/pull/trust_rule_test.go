package pull_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/config"
	"github.com/murmur-nexus/mur/fetch/github"
	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/fetch/provenance/sigstore"
	"github.com/murmur-nexus/mur/fetch/provenance/sigstore/provenancetest"
	"github.com/murmur-nexus/mur/fetch/publish"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
)

// The trust rule for keyed bundles: an unknown key's bundle proves nothing (under prefer the
// artifact is pulled with a warning that names the key, under require it fails), and a bundle by
// a trusted key that names other bytes is a mismatch under both.
func TestTrustRuleForKeyedBundles(t *testing.T) {
	t.Parallel()
	st := pulltest.OpenStore(t, "oci-layout:"+t.TempDir(), ocistore.Options{})
	p := pulltest.Pack(t, "grep", "1.2.0", 23)
	path := t.TempDir() + "/grep-1.2.0.mur.zip"
	writeFile(t, path, p.Zip)
	item, err := publish.FromFile(path, "acme", "any")
	if err != nil {
		t.Fatal(err)
	}
	local := &sigstore.Local{}
	attacker, _ := pulltest.ECDSAKey(t)
	attackerHint, err := publish.Sign(context.Background(), local, &item, attacker)
	if err != nil {
		t.Fatal(err)
	}
	if err := publish.Push(context.Background(), st, item); err != nil {
		t.Fatal(err)
	}
	_, teamPub := pulltest.ECDSAKey(t)
	teamHint, err := provenance.KeyHint([]byte(teamPub), "") // an entry's hint is its key's fingerprint
	if err != nil {
		t.Fatal(err)
	}
	policy := func(mode string, keys ...provenance.TrustedKey) func(string) config.ProvenancePolicy {
		return func(string) config.ProvenancePolicy {
			return config.ProvenancePolicy{Mode: mode, Trust: provenance.Trust{Keys: keys}}
		}
	}

	// prefer: pulled on its digest, with one warning that names the signer.
	w := pulltest.NewWorld(t)
	pl := w.Puller(st)
	pl.Provenance.Verifier, pl.Provenance.Policy = local, policy(config.ProvenancePrefer)
	res := w.MustPull(pl, pulltest.Req(grep, "1.2.0"))
	if len(res[0].Warnings) != 1 || !strings.Contains(res[0].Warnings[0], "no-provenance") || !strings.Contains(res[0].Warnings[0], attackerHint) {
		t.Fatalf("warnings = %q, want one no-provenance warning naming key %s", res[0].Warnings, attackerHint)
	}
	if e := w.ReadLock().Find("acme/grep"); e == nil || e.Provenance != nil {
		t.Fatalf("the lock recorded an unanchored bundle: %+v", e)
	}

	// require: refused, and a scope that trusts another key says so.
	w2 := pulltest.NewWorld(t)
	pl2 := w2.Puller(st)
	pl2.Provenance.Verifier, pl2.Provenance.Policy = local, policy(config.ProvenanceRequire, provenance.TrustedKey{PEM: teamPub})
	before := w2.State()
	_, err = w2.Pull(pl2, pulltest.Req(grep, "1.2.0"))
	if !errors.Is(err, errs.ProvenanceUnverifiable) || !strings.Contains(err.Error(), "scope acme trusts "+teamHint) || !strings.Contains(err.Error(), "rotated") {
		t.Fatalf("err = %v, want provenance-unverifiable naming the trusted key", err)
	}
	w2.AssertUnchanged(before)

	// A trusted key's bundle for other bytes, attached to these: a mismatch, even under prefer.
	other := publish.Item{Desc: item.Desc, File: path}
	other.Desc.Digest = digest.FromString("other bytes")
	team, teamPub2 := pulltest.ECDSAKey(t)
	hint2, err := publish.Sign(context.Background(), local, &other, team)
	if err != nil {
		t.Fatal(err)
	}
	st2 := pulltest.OpenStore(t, "oci-layout:"+t.TempDir(), ocistore.Options{})
	item.Bundles = nil
	if err := publish.Push(context.Background(), st2, item); err != nil {
		t.Fatal(err)
	}
	if err := st2.(store.BundleAttacher).AttachBundle(context.Background(), grep, "1.2.0", p.Digest(), other.Bundles[0]); err != nil {
		t.Fatal(err)
	}
	w3 := pulltest.NewWorld(t)
	pl3 := w3.Puller(st2)
	pl3.Provenance.Verifier, pl3.Provenance.Policy = local, policy(config.ProvenancePrefer, provenance.TrustedKey{Hint: hint2, PEM: teamPub2})
	before = w3.State()
	if _, err := w3.Pull(pl3, pulltest.Req(grep, "1.2.0")); !errors.Is(err, errs.ProvenanceMismatch) {
		t.Fatalf("err = %v, want provenance-mismatch for a trusted key's bundle of other bytes", err)
	}
	w3.AssertUnchanged(before)
}

// An attestation from a certificate authority nothing trusts proves nothing: under prefer the
// artifact is pulled with a warning that names the authority, and the lock records no provenance.
func TestUnanchoredAttestationCountsAsAbsentUnderPrefer(t *testing.T) {
	t.Parallel()
	w := pulltest.NewProvWorld(t, "GitHub, Inc.")
	stranger := provenancetest.NewCA(t, "GitHub, Inc.")
	w.Fake.AddAttestation("acme", "murmur-artifacts", w.D.String(), stranger.Mint(t, provenancetest.Statement(w.D.Encoded(), provenance.SLSAProvenanceV1), provenancetest.GoodLeaf()), false)
	res := w.MustPull(w.Puller(""), pulltest.Req(grep, "1.2.0"))
	if len(res[0].Warnings) != 1 || !strings.Contains(res[0].Warnings[0], "no-provenance") || !strings.Contains(res[0].Warnings[0], "certificate authority") {
		t.Fatalf("warnings = %q, want one no-provenance warning naming the certificate authority", res[0].Warnings)
	}
	if e := w.ReadLock().Find("acme/grep"); e == nil || e.Provenance != nil {
		t.Fatalf("the lock recorded an unanchored attestation: %+v", e)
	}
}

// A release asset replaced after it was attested keeps its old <asset>.sigstore.json: a bundle
// by an anchored signer that names other bytes. Under prefer that is a mismatch, not an
// unattested artifact, and nothing is written.
func TestReplacedAssetsOldBundleIsAMismatch(t *testing.T) {
	t.Parallel()
	w := pulltest.NewProvWorld(t, "GitHub, Inc.")
	old := w.CA.Mint(t, provenancetest.Statement(digest.FromString("the bytes first released").Encoded(), provenance.SLSAProvenanceV1), provenancetest.GoodLeaf())
	w.Fake.AddAsset("acme", "murmur-artifacts", "v1.2.0", "grep-1.2.0.mur.zip"+github.BundleSuffix, old)
	before := w.State()
	_, err := w.Pull(w.Puller(""), pulltest.Req(grep, "1.2.0"))
	if !errors.Is(err, errs.ProvenanceMismatch) || !strings.Contains(err.Error(), "another artifact") {
		t.Fatalf("err = %v, want provenance-mismatch about another artifact", err)
	}
	w.AssertUnchanged(before)
}
