package pulltest

import (
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/config"
	"github.com/murmur-nexus/mur/fetch/github/githubtest"
	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/fetch/provenance/sigstore"
	"github.com/murmur-nexus/mur/fetch/provenance/sigstore/provenancetest"
	"github.com/murmur-nexus/mur/fetch/pull"
)

// ProvWorld is a GitHub source whose scope acme is served by acme/murmur-artifacts (owner
// 1234567, repository 7654321, as provenancetest.GoodLeaf attests), publishing acme/grep@1.2.0,
// and a CA of the test's own that mints its attestations.
type ProvWorld struct {
	*World
	Fake *githubtest.Server
	CA   *provenancetest.CA
	Zip  []byte
	D    digest.Digest
}

// NewProvWorld is a ProvWorld whose CA speaks for org.
func NewProvWorld(t *testing.T, org string) *ProvWorld {
	fake := githubtest.New(t)
	fake.AddRepo("acme", "murmur-artifacts", 1234567, 7654321)
	zip := githubtest.PackArtifact("grep", "1.2.0")
	fake.Publish("acme", "murmur-artifacts", "acme", githubtest.Artifact{Name: "acme/grep", Version: "1.2.0", Release: "v1.2.0", Asset: "grep-1.2.0.mur.zip", Data: zip})
	return &ProvWorld{World: NewWorld(t), Fake: fake, CA: provenancetest.NewCA(t, org), Zip: zip, D: digest.FromBytes(zip)}
}

// Attest publishes an attestation of the zip minted with lf (and the SLSA predicate unless
// predicate is given).
func (w *ProvWorld) Attest(t *testing.T, lf provenancetest.Leaf, viaURL bool) []byte {
	b := w.CA.Mint(t, provenancetest.Statement(w.D.Encoded(), provenance.SLSAProvenanceV1), lf)
	w.Fake.AddAttestation("acme", "murmur-artifacts", w.D.String(), b, viaURL)
	return b
}

// Puller pulls from the world's source, checking bundles against its CA under provenance mode
// (the default policy when "").
func (w *ProvWorld) Puller(mode string) *pull.Puller {
	p := w.World.Puller()
	p.Source = GitHubSource(w.Fake)
	p.Provenance.Verifier = &sigstore.Local{Roots: sigstore.NewRoots(w.CA.Material())}
	if mode != "" {
		p.Provenance.Policy = func(string) config.ProvenancePolicy { return config.ProvenancePolicy{Mode: mode} }
	}
	return p
}
