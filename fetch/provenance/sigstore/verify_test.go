package sigstore

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/fetch/provenance/sigstore/provenancetest"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
)

var (
	zipDigest   = digest.FromString("the grep zip")
	otherDigest = digest.FromString("another artifact")
)

func acmeExpect() Expect {
	return Expect{Artifact: "acme/grep@1.2.0", Scope: "acme", OwnerID: 1234567, RepoID: 7654321}
}

func TestVerifyMintedBundles(t *testing.T) {
	for _, org := range []string{"GitHub, Inc.", "sigstore.dev"} {
		t.Run(org, func(t *testing.T) {
			c := provenancetest.NewCA(t, org)
			roots := NewRoots(c.Material())
			good := c.Mint(t, provenancetest.Statement(zipDigest.Encoded(), SLSAProvenanceV1), provenancetest.GoodLeaf())
			facts, err := Verify(good, zipDigest, acmeExpect(), roots)
			if err != nil {
				t.Fatalf("good bundle: %v", err)
			}
			if facts.OwnerID != 1234567 || facts.RepoID != 7654321 || facts.Kind != KindGitHub ||
				facts.Signer != provenancetest.GoodLeaf().SAN || facts.Repository != "acme/murmur-tools" || facts.SourceCommit != provenancetest.GoodLeaf().Commit {
				t.Fatalf("facts = %+v", facts)
			}

			type tc struct {
				name   string
				bundle func() []byte
				expect func(*Expect)
				roots  *Roots
				token  errs.Token
				says   string
			}
			mintWith := func(f func(*provenancetest.Leaf)) func() []byte {
				return func() []byte {
					lf := provenancetest.GoodLeaf()
					f(&lf)
					return c.Mint(t, provenancetest.Statement(zipDigest.Encoded(), SLSAProvenanceV1), lf)
				}
			}
			stranger := provenancetest.NewCA(t, org)
			asked := func(e *Expect) { e.Asked = "--owner-id and --repo-id"; e.Scope = "" }
			cases := []tc{
				{name: "wrong owner id", bundle: mintWith(func(l *provenancetest.Leaf) {
					l.OwnerID = "55"
					l.RepoID = "9990001"
					l.RepoURI = "https://github.com/evil/tools"
				}),
					token: errs.ProvenanceMismatch,
					says:  "acme/grep@1.2.0 was attested by repository 9990001 (evil/tools), owner 55; murmur.lock pins owner 1234567, repository 7654321; run 'mur lock forget-scope acme' only if the transfer is expected"},
				{name: "wrong repo id", bundle: mintWith(func(l *provenancetest.Leaf) { l.RepoID = "7654322" }), token: errs.ProvenanceMismatch, says: "repository 7654322"},
				{name: "no owner id", bundle: mintWith(func(l *provenancetest.Leaf) { l.OwnerID = "" }), expect: func(e *Expect) { e.OwnerID = 0 }, token: errs.ProvenanceMismatch, says: "owner (none)"},
				{name: "subject of another artifact", bundle: func() []byte {
					return c.Mint(t, provenancetest.Statement(otherDigest.Encoded(), SLSAProvenanceV1), provenancetest.GoodLeaf())
				}, token: errs.ProvenanceMismatch, says: "another artifact"},
				{name: "self-hosted runner", bundle: mintWith(func(l *provenancetest.Leaf) { l.Runner = "self-hosted" }), token: errs.ProvenanceMismatch, says: "allow_self_hosted"},
				{name: "another issuer", bundle: mintWith(func(l *provenancetest.Leaf) { l.Issuer = "https://gitlab.com" }), token: errs.ProvenanceMismatch, says: "not GitHub Actions"},
				{name: "signer workflow is not a prefix", bundle: func() []byte { return good },
					expect: func(e *Expect) { e.SignerWorkflow = "acme/murmur-tools/.github/workflows/release.yml" }, token: errs.ProvenanceMismatch, says: "signer_workflow"},
				{name: "certificate outside its validity without a timestamp", bundle: mintWith(func(l *provenancetest.Leaf) {
					l.NotBefore, l.NotAfter, l.NoTimestamp = time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour), true
				}), token: errs.ProvenanceUnverifiable, says: "update mur or set trusted_root"},
				{name: "unknown CA", bundle: func() []byte {
					return stranger.Mint(t, provenancetest.Statement(zipDigest.Encoded(), SLSAProvenanceV1), provenancetest.GoodLeaf())
				}, token: errs.ProvenanceUnverifiable, says: "update mur or set trusted_root"},
				{name: "embedded roots don't know the test CA", bundle: func() []byte { return good }, roots: mustEmbedded(t),
					token: errs.ProvenanceUnverifiable, says: "mur's embedded trusted roots"},
				{name: "tampered DSSE payload", bundle: func() []byte { return provenancetest.Tamper(t, good) }, token: errs.ProvenanceMismatch, says: "does not verify"},
				{name: "non-SLSA predicate", bundle: func() []byte {
					return c.Mint(t, provenancetest.Statement(zipDigest.Encoded(), "https://in-toto.io/attestation/release/v0.1"), provenancetest.GoodLeaf())
				}, token: errs.ProvenanceMismatch, says: "not SLSA provenance v1"},
				{name: "not a bundle", bundle: func() []byte { return []byte(`{"mediaType":"text/plain"}`) }, token: errs.ProvenanceUnverifiable, says: "not a Sigstore bundle"},
				// mur verify FILE --bundle: the ids were asked on the command line, and no lock
				// or scope is named.
				{name: "asked: wrong owner id", bundle: mintWith(func(l *provenancetest.Leaf) { l.OwnerID = "55" }), expect: asked,
					token: errs.ProvenanceMismatch, says: "was attested by repository 7654321 (acme/murmur-tools), owner 55; --owner-id and --repo-id ask for owner 1234567, repository 7654321"},
				{name: "asked: self-hosted runner", bundle: mintWith(func(l *provenancetest.Leaf) { l.Runner = "self-hosted" }), expect: asked,
					token: errs.ProvenanceMismatch, says: `built on a "self-hosted" runner, not a GitHub-hosted one; a self-hosted runner is as trustworthy as whoever controls it, and a consumer's pull refuses it unless`},
				{name: "asked: signer workflow", bundle: func() []byte { return good },
					expect: func(e *Expect) {
						asked(e)
						e.SignerWorkflow = "https://github.com/acme/murmur-tools/.github/workflows/nightly.yml"
					},
					token: errs.ProvenanceMismatch, says: "which does not start with --signer-workflow https://github.com/acme/murmur-tools/.github/workflows/nightly.yml ("},
			}
			for _, k := range cases {
				t.Run(k.name, func(t *testing.T) {
					e := acmeExpect()
					if k.expect != nil {
						k.expect(&e)
					}
					r := roots
					if k.roots != nil {
						r = k.roots
					}
					_, err := Verify(k.bundle(), zipDigest, e, r)
					if !errors.Is(err, k.token) {
						t.Fatalf("err = %v, want %s", err, k.token)
					}
					if !strings.Contains(err.Error(), k.says) {
						t.Fatalf("err = %v\nwant it to say %q", err, k.says)
					}
					if e.Asked != "" && (strings.Contains(err.Error(), "murmur.lock") || strings.Contains(err.Error(), "scope")) {
						t.Fatalf("err = %v\nnames a lock or a scope that has nothing to do with a file checked alone", err)
					}
				})
			}

			// What is refused above passes when the scope allows it.
			self := mintWith(func(l *provenancetest.Leaf) { l.Runner = "self-hosted" })()
			e := acmeExpect()
			e.AllowSelfHosted = true
			if _, err := Verify(self, zipDigest, e, roots); err != nil {
				t.Fatalf("allow_self_hosted: %v", err)
			}
			e = acmeExpect()
			e.SignerWorkflow = "https://github.com/acme/murmur-tools/.github/workflows/release.yml@"
			if _, err := Verify(good, zipDigest, e, roots); err != nil {
				t.Fatalf("signer_workflow prefix: %v", err)
			}
		})
	}
}

func mustEmbedded(t *testing.T) *Roots {
	r, err := EmbeddedRoots()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestNamesFiltersBySubject(t *testing.T) {
	c := provenancetest.NewCA(t, "GitHub, Inc.")
	b := c.Mint(t, provenancetest.Statement(zipDigest.Encoded(), SLSAProvenanceV1), provenancetest.GoodLeaf())
	if !provenance.Names(b, zipDigest) || provenance.Names(b, otherDigest) {
		t.Fatal("Names does not tell the subject apart")
	}
}

// signer_workflow is a prefix that ends at a path segment or at the ref: an owner, a
// repository, a workflow file, a workflow at any ref, or the whole SAN.
func TestSignerWorkflowEndsAtABoundary(t *testing.T) {
	const san = "https://github.com/acme/grep-evil/.github/workflows/release.yml@refs/tags/v1.2.0"
	for prefix, ok := range map[string]bool{
		"https://github.com/acme":                                                    true,
		"https://github.com/acme/":                                                   true,
		"https://github.com/acme/grep-evil":                                          true,
		"https://github.com/acme/grep-evil/.github/workflows/release.yml":            true,
		"https://github.com/acme/grep-evil/.github/workflows/release.yml@":           true,
		"https://github.com/acme/grep-evil/.github/workflows/release.yml@refs/tags/": true,
		san:                            true,
		"https://github.com/acme/gre":  false,
		"https://github.com/acme/grep": false,
		"https://github.com/ac":        false,
		"https://github.com/acme/grep-evil/.github/workflows/release":                  false,
		"https://github.com/acme/grep-evil/.github/workflows/release.yml@refs/tags/v1": false,
		san + "/":        false,
		"acme/grep-evil": false,
	} {
		if got := provenance.WorkflowPrefix(san, prefix); got != ok {
			t.Errorf("workflowPrefix(%q) = %v, want %v", prefix, got, ok)
		}
	}
	// And Verify holds a bundle to it.
	c := provenancetest.NewCA(t, "GitHub, Inc.")
	lf := provenancetest.GoodLeaf()
	lf.SAN = san
	b := c.Mint(t, provenancetest.Statement(zipDigest.Encoded(), SLSAProvenanceV1), lf)
	roots := NewRoots(c.Material())
	e := acmeExpect()
	e.SignerWorkflow = "https://github.com/acme/gre"
	_, err := Verify(b, zipDigest, e, roots)
	errtest.WantToken(t, err, errs.ProvenanceMismatch, "signer_workflow https://github.com/acme/gre", "ends at a '/' or '@'")
	e.SignerWorkflow = "https://github.com/acme/grep-evil"
	if _, err := Verify(b, zipDigest, e, roots); err != nil {
		t.Fatalf("repository prefix: %v", err)
	}
}

// A digest without an algorithm is refused; go-digest would panic on it, and take the helper down
// with every later request of the command.
func TestMalformedDigestIsRefused(t *testing.T) {
	_, err := Verify([]byte(`{}`), "nope", acmeExpect(), mustEmbedded(t))
	errtest.WantToken(t, err, errs.Internal, `"nope" is not a sha256 digest`)
	_, _, err = SignDigest(ecdsaPEM(t), "nope", nil)
	errtest.WantToken(t, err, errs.Internal, `"nope" is not a sha256 digest`)
}
