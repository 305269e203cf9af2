package provenance

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/attest"
	"github.com/murmur-nexus/mur/internal/errs"
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
			c := newTestCA(t, org)
			roots := NewRoots(c.material())
			good := c.mint(t, statementFor(zipDigest.Encoded(), SLSAProvenanceV1), goodLeaf())
			facts, err := Verify(good, zipDigest, acmeExpect(), roots)
			if err != nil {
				t.Fatalf("good bundle: %v", err)
			}
			if facts.OwnerID != 1234567 || facts.RepoID != 7654321 || facts.Kind != KindGitHub ||
				facts.Signer != goodLeaf().SAN || facts.Repository != "acme/murmur-tools" || facts.SourceCommit != goodLeaf().Commit {
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
			mintWith := func(f func(*leaf)) func() []byte {
				return func() []byte {
					lf := goodLeaf()
					f(&lf)
					return c.mint(t, statementFor(zipDigest.Encoded(), SLSAProvenanceV1), lf)
				}
			}
			stranger := newTestCA(t, org)
			cases := []tc{
				{name: "wrong owner id", bundle: mintWith(func(l *leaf) { l.OwnerID = "55"; l.RepoID = "9990001"; l.RepoURI = "https://github.com/evil/tools" }),
					token: errs.ProvenanceMismatch,
					says:  "acme/grep@1.2.0 was attested by repository 9990001 (evil/tools), owner 55; murmur.lock pins owner 1234567, repository 7654321; run 'mur lock forget-scope acme' only if the transfer is expected"},
				{name: "wrong repo id", bundle: mintWith(func(l *leaf) { l.RepoID = "7654322" }), token: errs.ProvenanceMismatch, says: "repository 7654322"},
				{name: "no owner id", bundle: mintWith(func(l *leaf) { l.OwnerID = "" }), expect: func(e *Expect) { e.OwnerID = 0 }, token: errs.ProvenanceMismatch, says: "owner (none)"},
				{name: "subject of another artifact", bundle: func() []byte {
					return c.mint(t, statementFor(otherDigest.Encoded(), SLSAProvenanceV1), goodLeaf())
				}, token: errs.ProvenanceMismatch, says: "another artifact"},
				{name: "self-hosted runner", bundle: mintWith(func(l *leaf) { l.Runner = "self-hosted" }), token: errs.ProvenanceMismatch, says: "allow_self_hosted"},
				{name: "another issuer", bundle: mintWith(func(l *leaf) { l.Issuer = "https://gitlab.com" }), token: errs.ProvenanceMismatch, says: "not GitHub Actions"},
				{name: "signer workflow is not a prefix", bundle: func() []byte { return good },
					expect: func(e *Expect) { e.SignerWorkflow = "acme/murmur-tools/.github/workflows/release.yml" }, token: errs.ProvenanceMismatch, says: "signer_workflow"},
				{name: "certificate outside its validity without a timestamp", bundle: mintWith(func(l *leaf) {
					l.NotBefore, l.NotAfter, l.NoTimestamp = time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour), true
				}), token: errs.ProvenanceUnverifiable, says: "update mur or set trusted_root"},
				{name: "unknown CA", bundle: func() []byte {
					return stranger.mint(t, statementFor(zipDigest.Encoded(), SLSAProvenanceV1), goodLeaf())
				}, token: errs.ProvenanceUnverifiable, says: "update mur or set trusted_root"},
				{name: "embedded roots don't know the test CA", bundle: func() []byte { return good }, roots: mustEmbedded(t),
					token: errs.ProvenanceUnverifiable, says: "mur's embedded trusted roots"},
				{name: "tampered DSSE payload", bundle: func() []byte { return tamper(t, good) }, token: errs.ProvenanceMismatch, says: "does not verify"},
				{name: "non-SLSA predicate", bundle: func() []byte {
					return c.mint(t, statementFor(zipDigest.Encoded(), "https://in-toto.io/attestation/release/v0.1"), goodLeaf())
				}, token: errs.ProvenanceMismatch, says: "not SLSA provenance v1"},
				{name: "not a bundle", bundle: func() []byte { return []byte(`{"mediaType":"text/plain"}`) }, token: errs.ProvenanceUnverifiable, says: "not a Sigstore bundle"},
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
				})
			}

			// What is refused above passes when the scope allows it.
			self := mintWith(func(l *leaf) { l.Runner = "self-hosted" })()
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

// tamper rewrites the attested subject inside the signed payload, as an attacker who swaps the
// artifact would, keeping the old signature.
func tamper(t *testing.T, b []byte) []byte {
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	env := m["dsseEnvelope"].(map[string]any)
	payload, _ := base64.StdEncoding.DecodeString(env["payload"].(string))
	payload = bytes.Replace(payload, []byte(`"builtBy"`), []byte(`"builtBy"`), 1)
	payload = bytes.Replace(payload, []byte(`buildtypes`), []byte(`buildTypes`), 1)
	env["payload"] = base64.StdEncoding.EncodeToString(payload)
	out, _ := json.Marshal(m)
	return out
}

func TestNamesFiltersBySubject(t *testing.T) {
	c := newTestCA(t, "GitHub, Inc.")
	b := c.mint(t, statementFor(zipDigest.Encoded(), SLSAProvenanceV1), goodLeaf())
	if !attest.Names(b, zipDigest) || attest.Names(b, otherDigest) {
		t.Fatal("Names does not tell the subject apart")
	}
}
