// Package provenance is what the rest of mur knows about provenance: the facts a verified Sigstore
// bundle proves, what a pull expects of one, and a Verifier that checks bundles.
//
// The checking itself lives in fetch/provenance/sigstore, the only package that imports sigstore-go.
// Its package initialisation costs about 25 ms and 2 MB of allocations per process (protobuf
// registries, go-openapi's validators), which would slow every `mur run` and every warm pull,
// so the mur binary never links it: Helper runs it as a separate process, mur-provenance,
// started the first time a command has a bundle to check and kept for the rest of the command.
package provenance

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"strings"

	"github.com/opencontainers/go-digest"
)

// The kinds of provenance a lock entry records.
const (
	KindGitHub = "github-attestation"
	KindKey    = "key"
)

const (
	// BundleMediaType is the media type of the Sigstore bundles mur reads and writes, and the
	// artifactType of their OCI referrers (cosign's layout).
	BundleMediaType = "application/vnd.dev.sigstore.bundle.v0.3+json"
	// SLSAProvenanceV1 is the only predicate an attestation may carry.
	SLSAProvenanceV1 = "https://slsa.dev/provenance/v1"
	// GitHubActionsIssuer is the only OIDC issuer an attestation's certificate may name.
	GitHubActionsIssuer = "https://token.actions.githubusercontent.com"
)

// Expect is what a bundle must show: the pins of murmur.lock and the scope's policy.
type Expect struct {
	Artifact        string `json:"artifact"`                    // "acme/grep@1.2.0", for messages
	Scope           string `json:"scope"`                       // for the forget-scope hint
	OwnerID         int64  `json:"owner_id,omitempty"`          // GitHub's numeric owner id the lock pins
	RepoID          int64  `json:"repo_id,omitempty"`           // GitHub's numeric repository id the lock pins
	AllowSelfHosted bool   `json:"allow_self_hosted,omitempty"` // accept a runner other than github-hosted
	SignerWorkflow  string `json:"signer_workflow,omitempty"`   // when set, a prefix the certificate's SAN must start with
	// Asked names who states these expectations, for messages, when it is not murmur.lock and
	// config.yaml: "--owner-id and --repo-id" for `mur verify FILE --bundle`, whose failures
	// must not send the user to a lock or a scope that has nothing to do with the file.
	Asked string `json:"asked,omitempty"`
	// SHA512 is the artifact's SHA-512, needed only by an Ed25519 keyed bundle (Ed25519ph signs
	// a SHA-512 digest); NeedsSHA512 says when to compute it.
	SHA512 []byte `json:"sha512,omitempty"`
}

// Facts is what a verified bundle proves, for the lock, the records and `mur verify --json`.
type Facts struct {
	Kind         string `json:"kind"`
	Signer       string `json:"signer"`
	OwnerID      int64  `json:"owner_id,omitempty"`
	RepoID       int64  `json:"repo_id,omitempty"`
	Repository   string `json:"repository,omitempty"`
	SourceCommit string `json:"source_commit,omitempty"`
	Runner       string `json:"runner,omitempty"`
}

// TrustedKey is one entry of trusted_keys in config.yaml: the hint a keyed bundle carries and
// the PEM of the public key.
type TrustedKey struct {
	Hint string `json:"hint" yaml:"hint"`
	PEM  string `json:"pem" yaml:"pem"`
}

// Trust is what bundles are checked against: the embedded roots, or the trusted_root file that
// replaces them, and the trusted keys.
type Trust struct {
	RootFile string       `json:"trusted_root,omitempty"`
	Keys     []TrustedKey `json:"trusted_keys,omitempty"`
}

// WorkflowPrefix reports whether prefix names san or what it lies under: an owner, a repository,
// a workflow file, or a workflow at any ref. The prefix must end where a path segment or the ref
// does, since https://github.com/acme/gre would otherwise admit every workflow of acme/grep-evil.
// It is the one rule for signer_workflow: the verifier holds a certificate's SAN to it, and
// config.yaml holds a project's signer_workflow to the home's by it (a narrowing must lie under).
func WorkflowPrefix(san, prefix string) bool {
	if !strings.HasPrefix(san, prefix) {
		return false
	}
	if len(san) == len(prefix) || strings.HasSuffix(prefix, "/") || strings.HasSuffix(prefix, "@") {
		return true
	}
	next := san[len(prefix)]
	return next == '/' || next == '@'
}

// Verifier checks a bundle offline. Helper is the one mur uses; fetch/provenance.Local does the
// same in process, for tests and for mur-provenance itself.
type Verifier interface {
	Verify(ctx context.Context, bundle []byte, artifact digest.Digest, want Expect, trust Trust) (Facts, error)
}

// Signer makes keyed bundles for `mur push --sign-key`.
type Signer interface {
	Sign(ctx context.Context, keyPEM []byte, artifact digest.Digest, sha512 []byte) (bundle []byte, hint string, err error)
}

type rawBundle struct {
	DSSE *struct {
		Payload []byte `json:"payload"`
	} `json:"dsseEnvelope"`
	Message *struct {
		Digest struct {
			Algorithm string `json:"algorithm"`
			Digest    []byte `json:"digest"`
		} `json:"messageDigest"`
	} `json:"messageSignature"`
}

// Names reports whether bundle may speak for artifact, without verifying anything: a cheap
// filter before Verify when a store or a release holds several bundles.
func Names(bundle []byte, artifact digest.Digest) bool {
	var raw rawBundle
	if artifact.Validate() != nil || json.Unmarshal(bundle, &raw) != nil {
		return false
	}
	switch {
	case raw.DSSE != nil:
		var st struct {
			Subject []struct {
				Digest map[string]string `json:"digest"`
			} `json:"subject"`
		}
		if json.Unmarshal(raw.DSSE.Payload, &st) != nil {
			return false
		}
		for _, s := range st.Subject {
			if s.Digest["sha256"] == artifact.Encoded() {
				return true
			}
		}
	case raw.Message != nil && raw.Message.Digest.Algorithm == "SHA2_512":
		return true // Ed25519ph signs a SHA-512 digest: only Verify, with it, can tell
	case raw.Message != nil:
		sum, err := hex.DecodeString(artifact.Encoded())
		return err == nil && bytes.Equal(sum, raw.Message.Digest.Digest)
	}
	return false
}

// NeedsSHA512 reports whether verifying bundle needs the artifact's SHA-512 (Expect.SHA512).
func NeedsSHA512(bundle []byte) bool {
	var raw rawBundle
	return json.Unmarshal(bundle, &raw) == nil && raw.Message != nil && raw.Message.Digest.Algorithm == "SHA2_512"
}

// BundleKind is what signs bundle, read without verifying anything: KindGitHub for a
// certificate (an attestation), KindKey for a public-key hint, "" when it says neither.
func BundleKind(bundle []byte) (kind, hint string) {
	var raw struct {
		Material struct {
			PublicKey *struct {
				Hint string `json:"hint"`
			} `json:"publicKey"`
			Certificate json.RawMessage `json:"certificate"`
			Chain       json.RawMessage `json:"x509CertificateChain"`
		} `json:"verificationMaterial"`
	}
	if json.Unmarshal(bundle, &raw) != nil {
		return "", ""
	}
	switch m := raw.Material; {
	case m.PublicKey != nil:
		return KindKey, m.PublicKey.Hint
	case m.Certificate != nil || m.Chain != nil:
		return KindGitHub, ""
	}
	return "", ""
}
