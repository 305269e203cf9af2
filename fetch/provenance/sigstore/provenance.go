// Package sigstore verifies Sigstore bundles offline: GitHub artifact attestations, tied to the
// numeric owner and repository ids that murmur.lock pins, and keyed signatures for team
// registries. It is the only package of mur that imports sigstore-go, and only the
// mur-provenance helper links it, so that commands which verify nothing never pay for its package
// initialisation (see fetch/provenance).
//
// Verification is gh's per-instance policy (the public-good instance needs an SCT, a
// transparency-log entry and an observer timestamp; GitHub's own instance a signed timestamp),
// and then stricter than gh: the subject digest is the zip's, the predicate is SLSA provenance v1,
// the issuer is GitHub Actions, the certificate's owner id (OID 1.3.6.1.4.1.57264.1.17) and
// repository id (…1.15) equal the pins, the runner is GitHub-hosted unless allowed otherwise, and
// an optional signer workflow is a prefix of the certificate's SAN that ends at a '/' or '@'.
package sigstore

import (
	"crypto/x509"
	"encoding/hex"
	"sort"
	"strconv"
	"strings"

	"github.com/opencontainers/go-digest"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/verify"

	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/internal/errs"
)

// Aliases of attest's types, so that callers in process (tests, mur-provenance) need one import.
type (
	Expect = provenance.Expect
	Facts  = provenance.Facts
)

const (
	KindGitHub          = provenance.KindGitHub
	KindKey             = provenance.KindKey
	SLSAProvenanceV1    = provenance.SLSAProvenanceV1
	GitHubActionsIssuer = provenance.GitHubActionsIssuer
	githubHosted        = "github-hosted"
)

// Verify checks bundleJSON against the artifact's digest, the pins in want and the trusted
// roots, entirely offline. A bundle that is well-formed but says something else is a
// provenance-mismatch; one that can't be checked with these roots is provenance-unverifiable.
func Verify(bundleJSON []byte, artifact digest.Digest, want Expect, roots *Roots) (Facts, error) {
	// Validate first: Algorithm panics on a digest without a ':', and a request may carry one.
	if artifact.Validate() != nil || artifact.Algorithm() != digest.SHA256 {
		return Facts{}, errs.New(errs.Internal, "provenance of %s: %q is not a sha256 digest", want.Artifact, artifact)
	}
	sum, _ := hex.DecodeString(artifact.Encoded())
	var b bundle.Bundle
	if err := b.UnmarshalJSON(bundleJSON); err != nil {
		return Facts{}, errs.Wrap(err, errs.ProvenanceUnverifiable, "the provenance bundle of %s is not a Sigstore bundle (%s); the publisher must attach a valid bundle v0.3",
			want.Artifact, sigstoreMessage(err))
	}
	vc, err := b.VerificationContent()
	if err != nil {
		return Facts{}, errs.Wrap(err, errs.ProvenanceUnverifiable, "the provenance bundle of %s has no usable verification material: %s", want.Artifact, sigstoreMessage(err))
	}
	if vc.Certificate() == nil {
		return verifyKeyed(&b, vc, sum, want, roots)
	}
	return verifyAttestation(&b, vc.Certificate(), sum, artifact, want, roots)
}

func verifyAttestation(b *bundle.Bundle, leaf *x509.Certificate, sum []byte, artifact digest.Digest, want Expect, roots *Roots) (Facts, error) {
	inst := roots.instanceFor(leaf)
	if inst == nil {
		return Facts{}, errs.Wrap(&provenance.Unanchored{Signer: "certificate authority " + clean(leaf.Issuer.String())}, errs.ProvenanceUnverifiable, "the provenance of %s is signed by a certificate authority that %s does not hold (issuer %q); it may be newer than these roots: run 'mur trust refresh', update mur or set trusted_root in $MURMUR_HOME/config.yaml",
			want.Artifact, roots.describe(), clean(leaf.Issuer.String()))
	}
	v, err := verify.NewVerifier(inst.material, inst.options...)
	if err != nil {
		return Facts{}, errs.Wrap(err, errs.Internal, "provenance verifier for %s: %v", inst.name, err)
	}
	res, err := v.Verify(b, verify.NewPolicy(verify.WithArtifactDigest("sha256", sum), verify.WithoutIdentitiesUnsafe()))
	if err != nil {
		return Facts{}, attestationError(b, err, inst, want, artifact)
	}
	if res.Signature == nil || res.Signature.Certificate == nil {
		return Facts{}, errs.New(errs.ProvenanceMismatch, "the provenance of %s carries no signing certificate", want.Artifact)
	}
	if res.Statement == nil {
		return Facts{}, errs.New(errs.ProvenanceMismatch, "the provenance of %s is a bare signature, not an in-toto attestation; mur needs SLSA provenance v1 from actions/attest-build-provenance", want.Artifact)
	}
	if res.Statement.PredicateType != SLSAProvenanceV1 {
		return Facts{}, errs.New(errs.ProvenanceMismatch, "the attestation of %s has predicate %q, not SLSA provenance v1 (%s); mur accepts build provenance only",
			want.Artifact, clean(res.Statement.PredicateType), SLSAProvenanceV1)
	}
	ext := res.Signature.Certificate.Extensions
	facts := Facts{
		Kind:         KindGitHub,
		Signer:       res.Signature.Certificate.SubjectAlternativeName,
		Repository:   strings.TrimPrefix(ext.SourceRepositoryURI, "https://github.com/"),
		SourceCommit: ext.SourceRepositoryDigest,
		Runner:       ext.RunnerEnvironment,
	}
	facts.OwnerID, _ = strconv.ParseInt(ext.SourceRepositoryOwnerIdentifier, 10, 64)
	facts.RepoID, _ = strconv.ParseInt(ext.SourceRepositoryIdentifier, 10, 64)
	if ext.Issuer != GitHubActionsIssuer {
		return facts, errs.New(errs.ProvenanceMismatch, "the attestation of %s was issued by %q, not GitHub Actions (%s)",
			want.Artifact, clean(ext.Issuer), GitHubActionsIssuer)
	}
	if (facts.OwnerID == 0 || facts.OwnerID != want.OwnerID || facts.RepoID != want.RepoID) && want.Asked != "" {
		return facts, errs.New(errs.ProvenanceMismatch, "%s was attested by repository %s (%s), owner %s; %s ask for owner %d, repository %d",
			want.Artifact, orNone(ext.SourceRepositoryIdentifier), orNone(clean(facts.Repository)), orNone(ext.SourceRepositoryOwnerIdentifier),
			want.Asked, want.OwnerID, want.RepoID)
	}
	if facts.OwnerID == 0 || facts.OwnerID != want.OwnerID || facts.RepoID != want.RepoID {
		return facts, errs.New(errs.ProvenanceMismatch, "%s was attested by repository %s (%s), owner %s; murmur.lock pins owner %d, repository %d; run 'mur lock forget-scope %s' only if the transfer is expected",
			want.Artifact, orNone(ext.SourceRepositoryIdentifier), orNone(clean(facts.Repository)), orNone(ext.SourceRepositoryOwnerIdentifier),
			want.OwnerID, want.RepoID, want.Scope)
	}
	if facts.Runner != githubHosted && !want.AllowSelfHosted && want.Asked != "" {
		return facts, errs.New(errs.ProvenanceMismatch, "%s was built on a %q runner, not a GitHub-hosted one; a self-hosted runner is as trustworthy as whoever controls it, and a consumer's pull refuses it unless their config.yaml sets allow_self_hosted: true",
			want.Artifact, clean(orNone(facts.Runner)))
	}
	if facts.Runner != githubHosted && !want.AllowSelfHosted {
		return facts, errs.New(errs.ProvenanceMismatch, "%s was built on a %q runner, not a GitHub-hosted one; a self-hosted runner is as trustworthy as whoever controls it. Set allow_self_hosted: true for scope %s in $MURMUR_HOME/config.yaml if that is expected (a project's config.yaml can't loosen the home's policy)",
			want.Artifact, clean(orNone(facts.Runner)), want.Scope)
	}
	if want.SignerWorkflow != "" && !provenance.WorkflowPrefix(facts.Signer, want.SignerWorkflow) {
		who := "the signer_workflow " + clean(want.SignerWorkflow) + " that scope " + want.Scope + " requires"
		if want.Asked != "" {
			who = "--signer-workflow " + clean(want.SignerWorkflow)
		}
		return facts, errs.New(errs.ProvenanceMismatch, "%s was signed by workflow %s, which does not start with %s (a prefix ends at a '/' or '@')",
			want.Artifact, clean(facts.Signer), who)
	}
	return facts, nil
}

// attestationError is why sigstore-go refused an attestation. sigstore-go passes over a log entry
// whose SET does not verify and counts a timestamp that does not verify as missing, so that a
// changed proof reads as one the roots can't check; checked one at a time, the bundle's own log
// entries and timestamps tell the two apart.
func attestationError(b *bundle.Bundle, err error, inst *instance, want Expect, artifact digest.Digest) error {
	msg := err.Error()
	if tsErr := checkTimeSources(b, inst.material, want, inst.name); tsErr != nil &&
		(errs.TokenOf(tsErr) == errs.ProvenanceMismatch || strings.Contains(msg, "timestamp") || strings.Contains(msg, "transparency log")) {
		return tsErr
	}
	return classify(err, want, artifact, inst.name)
}

// classify turns sigstore-go's verification error into mur's tokens. A missing or unknown
// time source is something the roots can't settle (unverifiable); a signature or subject that
// does not match is an attack or a mistake (mismatch).
func classify(err error, want Expect, artifact digest.Digest, roots string) error {
	msg := sigstoreMessage(err)
	switch {
	case strings.Contains(msg, "artifact digest"):
		return errs.Wrap(err, errs.ProvenanceMismatch, "the attestation of %s is about another artifact: no subject has digest %s", want.Artifact, artifact)
	case strings.Contains(msg, "failed to verify signature"), strings.Contains(msg, "does not match"):
		return errs.Wrap(err, errs.ProvenanceMismatch, "the provenance of %s does not verify: %s; the bundle was changed after it was signed", want.Artifact, msg)
	case strings.Contains(msg, "threshold"), strings.Contains(msg, "timestamp"), strings.Contains(msg, "certificate"), strings.Contains(msg, "SCT"), strings.Contains(msg, "transparency log"):
		return errs.Wrap(err, errs.ProvenanceUnverifiable, "the provenance of %s can't be verified against %s: %s; update mur or set trusted_root in $MURMUR_HOME/config.yaml if the signer is newer than this mur",
			want.Artifact, roots, msg)
	}
	return errs.Wrap(err, errs.ProvenanceMismatch, "the provenance of %s does not verify: %s", want.Artifact, msg)
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// keyHintError is the failure of a bundle signed by a key nothing trusts: unanchored, so that a
// pull under prefer counts it as no bundle. When the scope trusts other keys it names them, since
// a key other than the one the scope trusts is more likely a rotation or an attack than a gap.
func keyHintError(want Expect, hint string, roots *Roots) error {
	var trusted []string
	for _, h := range roots.trustedKeyNames() {
		trusted = append(trusted, clean(h))
	}
	sort.Strings(trusted)
	u := &provenance.Unanchored{Signer: "key " + clean(hint)}
	if want.Asked != "" {
		return errs.Wrap(u, errs.ProvenanceUnverifiable, "%s is signed by key %s, not by %s (%s); check it with the public half of the key that signed it",
			want.Artifact, clean(hint), want.Asked, strings.Join(trusted, ", "))
	}
	if len(trusted) > 0 {
		return errs.Wrap(u, errs.ProvenanceUnverifiable, "%s is signed by key %s; scope %s trusts %s; if the publisher rotated keys, add the new one to trusted_keys in $MURMUR_HOME/config.yaml",
			want.Artifact, clean(hint), want.Scope, strings.Join(trusted, ", "))
	}
	return errs.Wrap(u, errs.ProvenanceUnverifiable, "%s is signed by key %s, which no trusted_keys entry in $MURMUR_HOME/config.yaml names; add {pem_file: ITS-KEY.pub} under scopes.%s.trusted_keys if you trust that key (its hint is computed from the key)",
		want.Artifact, clean(hint), want.Scope)
}

// clean escapes the control characters of text that came from outside (a certificate, a
// server's error), so that it never reaches a terminal raw.
func clean(s string) string {
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}
