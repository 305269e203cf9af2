//go:build unix

package provenance_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/config"
	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/fetch/provenance/sigstore"
	"github.com/murmur-nexus/mur/fetch/provenance/sigstore/provenancetest"
	"github.com/murmur-nexus/mur/internal/errs"
)

var grepZip = digest.FromString("the grep zip")

// keyPair is a fresh P-256 signing key and the trusted_keys entry of its public half.
func keyPair(t *testing.T) ([]byte, provenance.TrustedKey) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	priv := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	pub, err := sigstore.PublicKeyPEM(priv)
	if err != nil {
		t.Fatal(err)
	}
	return priv, provenance.TrustedKey{PEM: pub}
}

// unanchored is the signer err names as anchored by nothing trusted, "" when it names none.
func unanchored(err error) string {
	var u *provenance.Unanchored
	if errors.As(err, &u) {
		return u.Signer
	}
	return ""
}

// The trust rule crosses the process boundary intact: a bundle whose signer nothing trusted
// anchors comes back from mur-provenance as unanchored, naming the signer (which a pull under
// prefer counts as no bundle), and a bundle by an anchored signer that fails comes back as a
// mismatch that is not unanchored (which fails a pull under prefer too).
func TestHelperKeepsTheTrustRule(t *testing.T) {
	h := helper(t, "serve")
	ctx := context.Background()
	signing, signer := keyPair(t)
	_, team := keyPair(t)
	bundle, hint, err := sigstore.SignDigest(signing, grepZip, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := provenance.Expect{Artifact: "acme/grep@1.2.0", Scope: "acme"}

	for name, trust := range map[string]provenance.Trust{
		"no trusted key":      {},
		"another trusted key": {Keys: []provenance.TrustedKey{team}},
	} {
		_, err := h.Verify(ctx, bundle, grepZip, want, trust)
		if errs.TokenOf(err) != errs.ProvenanceUnverifiable || unanchored(err) != "key "+hint {
			t.Errorf("%s: %v (unanchored %q), want provenance-unverifiable, unanchored key %s", name, err, unanchored(err), hint)
		}
	}
	facts, err := h.Verify(ctx, bundle, grepZip, want, provenance.Trust{Keys: []provenance.TrustedKey{team, signer}})
	if err != nil || facts.Kind != provenance.KindKey || facts.Signer != hint {
		t.Fatalf("a trusted key's bundle: %+v, %v", facts, err)
	}
	_, err = h.Verify(ctx, bundle, digest.FromString("other bytes"), want, provenance.Trust{Keys: []provenance.TrustedKey{signer}})
	if errs.TokenOf(err) != errs.ProvenanceMismatch || unanchored(err) != "" {
		t.Fatalf("a trusted key's bundle of other bytes: %v (unanchored %q), want a provenance-mismatch that is anchored", err, unanchored(err))
	}

	// An attestation by a certificate authority that no root holds is unanchored too.
	stranger := provenancetest.NewCA(t, "GitHub, Inc.")
	att := stranger.Mint(t, provenancetest.Statement(grepZip.Encoded(), provenance.SLSAProvenanceV1), provenancetest.GoodLeaf())
	want.OwnerID, want.RepoID = 1234567, 7654321
	_, err = h.Verify(ctx, att, grepZip, want, provenance.Trust{})
	if errs.TokenOf(err) != errs.ProvenanceUnverifiable || !strings.HasPrefix(unanchored(err), "certificate authority ") {
		t.Fatalf("an unknown CA's attestation: %v (unanchored %q)", err, unanchored(err))
	}
}

// The home's trusted_root goes from config.yaml to the verifier: relative to the home's folder,
// through the policy of every scope and across to mur-provenance, where it replaces the embedded
// roots. A project's trusted_root goes nowhere.
func TestHomeTrustedRootReachesTheVerifier(t *testing.T) {
	ca := provenancetest.NewCA(t, "GitHub, Inc.")
	att := ca.Mint(t, provenancetest.Statement(grepZip.Encoded(), provenance.SLSAProvenanceV1), provenancetest.GoodLeaf())
	want := provenance.Expect{Artifact: "acme/grep@1.2.0", Scope: "acme", OwnerID: 1234567, RepoID: 7654321}
	dir := t.TempDir()
	home, proj := filepath.Join(dir, "home"), filepath.Join(dir, "project")
	writeFile(t, filepath.Join(home, "roots", "team.json"), ca.TrustedRootJSON(t))
	writeFile(t, filepath.Join(proj, "roots.json"), ca.TrustedRootJSON(t))
	writeFile(t, filepath.Join(proj, config.ProjectFile), []byte("trusted_root: ../roots.json\n"))
	h := helper(t, "serve")
	// As mur runs it: with the trusted roots' cache, which a trusted_root replaces.
	h.Roots = &provenance.RootsCache{Dir: filepath.Join(home, "trust"), Offline: true}

	for _, c := range []struct {
		home     string
		rootFile string // what the policy must carry
		anchored bool
	}{
		{"trusted_root: roots/team.json\n", filepath.Join(home, "roots", "team.json"), true},
		{"", "", false},
	} {
		writeFile(t, filepath.Join(home, "config.yaml"), []byte(c.home))
		cfg, err := config.Load(filepath.Join(home, "config.yaml"), proj)
		if err != nil {
			t.Fatal(err)
		}
		pol := cfg.ProvenanceFor("acme")
		if pol.Trust.RootFile != c.rootFile {
			t.Fatalf("home %q: the policy carries trusted_root %q, want %q", c.home, pol.Trust.RootFile, c.rootFile)
		}
		facts, err := h.Verify(context.Background(), att, grepZip, want, pol.Trust)
		switch {
		case c.anchored && (err != nil || facts.OwnerID != 1234567):
			t.Fatalf("the home's trusted_root does not anchor its CA's attestation: %+v, %v", facts, err)
		case !c.anchored && unanchored(err) == "":
			t.Fatalf("with only the project's trusted_root naming the CA, its attestation: %+v, %v; want it unanchored", facts, err)
		}
	}
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
