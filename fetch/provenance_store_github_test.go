package fetch_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/config"
	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/provenance/sigstore"
	"github.com/murmur-nexus/mur/fetch/provenance/sigstore/provenancetest"
	"github.com/murmur-nexus/mur/fetch/publish"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/lock"
)

// A team store carries a GitHub-attested artifact with its attestation. Once murmur.lock pins
// the scope's owner, a pull from the store alone verifies the attestation against that pin and
// records it; another owner pinned is a mismatch; with no owner pinned there is nothing to hold
// the attestation to, and require refuses it as unverifiable.
func TestStoreCarriesAGitHubAttestation(t *testing.T) {
	src := newProvWorld(t, "GitHub, Inc.")
	bundle := src.attest(t, provenancetest.GoodLeaf(), true)
	src.fake.Close() // the store alone from here on
	path := filepath.Join(t.TempDir(), "grep-1.2.0.mur.zip")
	writeFile(t, path, src.zip)
	item, err := publish.FromFile(path, "acme", "any")
	if err != nil {
		t.Fatal(err)
	}
	item.Bundles = [][]byte{bundle}
	st := openStore(t, "oci-layout:"+filepath.Join(t.TempDir(), "layout"), ocistore.Options{})
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
			w := newWorld(t)
			if tt.pin != nil {
				err := lock.Update(context.Background(), w.proj.LockPath(), func(l *lock.Lock) error { return l.SetPin("acme", *tt.pin) })
				if err != nil {
					t.Fatal(err)
				}
			}
			pl := w.puller(st)
			pl.Provenance.Verifier = &sigstore.Local{Roots: sigstore.NewRoots(src.ca.Material())}
			pl.Provenance.Policy = func(string) config.ProvenancePolicy { return config.ProvenancePolicy{Mode: config.ProvenanceRequire} }
			before := w.state()
			_, err := w.pull(pl, req(grep, "1.2.0"))
			if tt.token != "" {
				if !errors.Is(err, tt.token) {
					t.Fatalf("pull: %v; want %s", err, tt.token)
				}
				w.assertUnchanged(before)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			e := w.readLock().Find("acme/grep")
			if e == nil || e.Provenance == nil || e.Provenance.Kind != lock.ProvenanceGitHub ||
				e.Provenance.Signer != provenancetest.GoodLeaf().SAN || e.Provenance.Bundle != digest.FromBytes(bundle).String() {
				t.Fatalf("entry %+v", e)
			}
		})
	}
}
