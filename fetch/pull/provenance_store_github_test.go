package pull_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/config"
	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/provenance/sigstore"
	"github.com/murmur-nexus/mur/fetch/provenance/sigstore/provenancetest"
	"github.com/murmur-nexus/mur/fetch/publish"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/lock"
)

// A team store carries a GitHub-attested artifact with its attestation. Once murmur.lock pins
// the scope's owner, a pull from the store alone verifies the attestation against that pin and
// records it; another owner pinned is a mismatch; with no owner pinned there is nothing to hold
// the attestation to, and require refuses it as unverifiable.
func TestStoreCarriesAGitHubAttestation(t *testing.T) {
	t.Parallel()
	src := pulltest.NewProvWorld(t, "GitHub, Inc.")
	bundle := src.Attest(t, provenancetest.GoodLeaf(), true)
	src.Fake.Close() // the store alone from here on
	path := filepath.Join(t.TempDir(), "grep-1.2.0.mur.zip")
	writeFile(t, path, src.Zip)
	item, err := publish.FromFile(path, "acme", "any")
	if err != nil {
		t.Fatal(err)
	}
	item.Bundles = [][]byte{bundle}
	st := pulltest.OpenStore(t, "oci-layout:"+filepath.Join(t.TempDir(), "layout"), ocistore.Options{})
	if err := publish.Push(context.Background(), st, item); err != nil {
		t.Fatal(err)
	}

	for _, tt := range []struct {
		name  string
		pin   *lock.ScopePin
		token errs.Token
	}{
		{"owner pinned", &lock.ScopePin{Source: "github:acme/murmur-artifacts", OwnerID: 1234567, RepoID: 7654321}, ""},
		{"another owner pinned", &lock.ScopePin{Source: "github:acme/murmur-artifacts", OwnerID: 1234568, RepoID: 7654321}, errs.ProvenanceMismatch},
		{"no owner pinned", nil, errs.ProvenanceUnverifiable},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := pulltest.NewWorld(t)
			if tt.pin != nil {
				err := lock.Update(context.Background(), w.Proj.LockPath(), func(l *lock.Lock) error { return l.SetPin("acme", *tt.pin) })
				if err != nil {
					t.Fatal(err)
				}
			}
			pl := w.Puller(st)
			pl.Provenance.Verifier = &sigstore.Local{Roots: sigstore.NewRoots(src.CA.Material())}
			pl.Provenance.Policy = func(string) config.ProvenancePolicy { return config.ProvenancePolicy{Mode: config.ProvenanceRequire} }
			before := w.State()
			_, err := w.Pull(pl, pulltest.Req(grep, "1.2.0"))
			if tt.token != "" {
				if !errors.Is(err, tt.token) {
					t.Fatalf("pull: %v; want %s", err, tt.token)
				}
				w.AssertUnchanged(before)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			e := w.ReadLock().Find("acme/grep")
			if e == nil || e.Provenance == nil || e.Provenance.Kind != lock.ProvenanceGitHub ||
				e.Provenance.Signer != provenancetest.GoodLeaf().SAN || e.Provenance.Bundle != digest.FromBytes(bundle).String() {
				t.Fatalf("entry %+v", e)
			}
		})
	}
}

// The bundle murmur.lock records, when this machine kept it, proves the pinned bytes again
// without any place holding it: a refetch of a pinned blob after the publisher removed its
// attestation passes on the kept bundle, and the lock stays as it was.
func TestRefetchProvenByTheKeptBundle(t *testing.T) {
	t.Parallel()
	w := pulltest.NewProvWorld(t, "GitHub, Inc.")
	w.Attest(t, provenancetest.GoodLeaf(), true)
	w.MustPull(w.Puller(""), pulltest.Req(grep, "1.2.0"))
	lockBefore := w.State().Lock
	if err := os.Remove(w.CAS.Path(w.D)); err != nil {
		t.Fatal(err)
	}
	w.Fake.RemoveAttestations("acme", "murmur-artifacts", w.D.String())
	res := w.MustPull(w.Puller(config.ProvenanceRequire), pulltest.Req(grep, "1.2.0"))
	if res[0].CacheHit || !w.CAS.Has(w.D) {
		t.Fatalf("the blob was not fetched again: %+v", res[0])
	}
	if after := w.State().Lock; after != lockBefore {
		t.Fatalf("murmur.lock changed:\n%s\n---\n%s", lockBefore, after)
	}
}

// Without the kept bundle, a place that serves the recorded bundle among others has it tried
// first: the lock keeps its record rather than move to another bundle that also verifies.
func TestRefetchPrefersTheRecordedBundle(t *testing.T) {
	t.Parallel()
	w := pulltest.NewProvWorld(t, "GitHub, Inc.")
	recorded := w.Attest(t, provenancetest.GoodLeaf(), true)
	w.MustPull(w.Puller(""), pulltest.Req(grep, "1.2.0"))
	lockBefore := w.State().Lock
	bd := digest.FromBytes(recorded)
	for _, d := range []digest.Digest{w.D, bd} {
		if err := os.Remove(w.CAS.Path(d)); err != nil {
			t.Fatal(err)
		}
	}
	w.Fake.RemoveAttestations("acme", "murmur-artifacts", w.D.String())
	w.Attest(t, provenancetest.GoodLeaf(), true) // another bundle that verifies, served first
	w.Fake.AddAttestation("acme", "murmur-artifacts", w.D.String(), recorded, true)
	w.MustPull(w.Puller(""), pulltest.Req(grep, "1.2.0"))
	if after := w.State().Lock; after != lockBefore {
		t.Fatalf("murmur.lock changed:\n%s\n---\n%s", lockBefore, after)
	}
	if !w.CAS.Has(bd) {
		t.Fatal("the recorded bundle was not kept again")
	}
}
