package sigstore

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha512"
	"encoding/hex"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/options"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/internal/errs"
)

// TrustedKey is one entry of trusted_keys.
type TrustedKey = provenance.TrustedKey

type trustedKey struct {
	verifier signature.Verifier
}

// WithKeys returns roots that also trust keys for keyed bundles (`mur push --sign-key`). A key is
// found by the hint its bundles carry, in either spelling of its fingerprint: hex, as mur
// writes it, or base64, as cosign does. An entry without a hint gets its fingerprint; one whose
// hint names another key is refused, since its bundles would never find it.
func (r *Roots) WithKeys(keys []TrustedKey) (*Roots, error) {
	out := &Roots{source: r.describe()}
	if r != nil {
		out.instances = r.instances
	}
	out.keys = map[string]trustedKey{}
	for i, k := range keys {
		hint, err := provenance.KeyHint([]byte(k.PEM), k.Hint)
		if err != nil {
			return nil, errs.Wrap(err, errs.InvalidConfig, "trusted_keys entry %d: %v", i+1, err)
		}
		pub, _ := provenance.ParsePublicKey([]byte(k.PEM)) // KeyHint has parsed it
		v, err := keyVerifier(pub)
		if err != nil {
			return nil, errs.Wrap(err, errs.InvalidConfig, "trusted_keys entry %s: %v", clean(hint), err)
		}
		fp, _ := provenance.Fingerprint(pub)
		hexHint, b64Hint := provenance.HintForms(fp)
		out.keys[hexHint] = trustedKey{verifier: v}
		out.keys[b64Hint] = trustedKey{verifier: v}
		out.keyNames = append(out.keyNames, hint)
	}
	return out, nil
}

// lookupKey finds the trusted key a bundle's hint names; hex is matched in either case.
func (r *Roots) lookupKey(hint string) (trustedKey, bool) {
	if r == nil || r.keys == nil {
		return trustedKey{}, false
	}
	if k, ok := r.keys[hint]; ok {
		return k, true
	}
	k, ok := r.keys[strings.ToLower(hint)]
	return k, ok
}

// keyVerifier verifies a signature over a digest: ECDSA P-256 with SHA-256, or Ed25519ph,
// which cosign also uses for blobs, since a pure Ed25519 signature needs the whole artifact.
func keyVerifier(pub crypto.PublicKey) (signature.Verifier, error) {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return nil, errs.New(errs.InvalidConfig, "ECDSA keys must use P-256")
		}
		return signature.LoadECDSAVerifier(k, crypto.SHA256)
	case ed25519.PublicKey:
		return signature.LoadED25519phVerifier(k)
	}
	return nil, errs.New(errs.InvalidConfig, "unsupported key type %T", pub)
}

// withInstances is m together with every instance of r: the logs and timestamp authorities that a
// keyed bundle's proofs are checked against.
func (r *Roots) withInstances(m root.TrustedMaterial) root.TrustedMaterial {
	c := root.TrustedMaterialCollection{m}
	for _, in := range r.instances {
		c = append(c, in.material)
	}
	return c
}

type expiringVerifier struct{ signature.Verifier }

func (expiringVerifier) ValidAtTime(time.Time) bool { return true }

func verifyKeyed(b *bundle.Bundle, vc verify.VerificationContent, sum []byte, want Expect, roots *Roots) (Facts, error) {
	hint := ""
	if pk := vc.PublicKey(); pk != nil {
		hint = pk.Hint()
	}
	k, ok := roots.lookupKey(hint)
	if !ok {
		return Facts{}, keyHintError(want, hint, roots)
	}
	material := root.NewTrustedPublicKeyMaterial(func(string) (root.TimeConstrainedVerifier, error) {
		return expiringVerifier{k.verifier}, nil
	})
	v, err := verify.NewVerifier(material, verify.WithNoObserverTimestamps())
	if err != nil {
		return Facts{}, errs.Wrap(err, errs.Internal, "key verifier: %v", err)
	}
	algo, artifactSum := "sha256", sum
	if sc, err := b.SignatureContent(); err == nil && sc.MessageSignatureContent() != nil && sc.MessageSignatureContent().DigestAlgorithm() == "SHA2_512" {
		// Ed25519ph: the signed digest is SHA-512, computed here from the artifact, whose
		// SHA-256 the caller has already checked against the pin.
		algo, artifactSum = "sha512", want.SHA512
		if len(artifactSum) != sha512.Size {
			return Facts{}, errs.New(errs.Internal, "verifying the Ed25519 signature of %s needs the artifact's SHA-512", want.Artifact)
		}
	}
	if _, err := v.Verify(b, verify.NewPolicy(verify.WithArtifactDigest(algo, artifactSum), verify.WithKey())); err != nil {
		return Facts{}, errs.Wrap(err, errs.ProvenanceMismatch, "the signature of %s by key %q does not verify: %s; the artifact or its bundle was changed after signing",
			want.Artifact, clean(hint), sigstoreMessage(err))
	}
	// The key's signature holds; a log entry or timestamp that the bundle carries must too.
	if err := checkTimeSources(b, roots.withInstances(material), want, roots.describe()); err != nil {
		return Facts{}, err
	}
	return Facts{Kind: KindKey, Signer: hint}, nil
}

// SignDigest signs an artifact with a PEM private key (ECDSA P-256 or Ed25519, PKCS#8 or SEC 1)
// and returns a bundle v0.3 with a publicKey hint and a messageSignature, the shape
// `cosign verify-blob --bundle --key` accepts. The hint is the key's SHA-256 fingerprint.
// ECDSA signs the zip's SHA-256 digest. Ed25519 can only sign a SHA-512 digest (Ed25519ph), so
// it signs sha512sum, the zip's SHA-512, which may be nil for ECDSA keys.
func SignDigest(keyPEM []byte, artifact digest.Digest, sha512sum []byte) (bundleJSON []byte, hint string, err error) {
	priv, err := provenance.ParsePrivateKey(keyPEM)
	if err != nil {
		return nil, "", errs.Wrap(err, errs.Usage, "the signing key can't sign: %v", err)
	}
	if artifact.Validate() != nil || artifact.Algorithm() != digest.SHA256 {
		return nil, "", errs.New(errs.Internal, "%q is not a sha256 digest", artifact)
	}
	sum, err := hex.DecodeString(artifact.Encoded())
	if err != nil {
		return nil, "", errs.New(errs.Internal, "%q is not a sha256 digest", artifact)
	}
	var sig []byte
	var pub crypto.PublicKey
	algo := protocommon.HashAlgorithm_SHA2_256
	switch k := priv.(type) {
	case *ecdsa.PrivateKey: // on P-256: ParsePrivateKey admits no other curve
		sig, err = ecdsa.SignASN1(rand.Reader, k, sum)
		pub = k.Public()
	case ed25519.PrivateKey:
		if len(sha512sum) != sha512.Size {
			return nil, "", errs.New(errs.Internal, "an Ed25519 signature needs the artifact's SHA-512")
		}
		sum = sha512sum
		algo = protocommon.HashAlgorithm_SHA2_512
		var s *signature.ED25519phSignerVerifier
		s, err = signature.LoadED25519phSignerVerifier(k)
		if err == nil {
			sig, err = s.SignMessage(nil, options.WithDigest(sum))
		}
		pub = k.Public()
	default:
		return nil, "", errs.New(errs.Usage, "the signing key is a %T; mur signs with ECDSA P-256 or Ed25519", priv)
	}
	if err != nil {
		return nil, "", errs.Wrap(err, errs.Internal, "signing: %v", err)
	}
	fp, err := provenance.Fingerprint(pub)
	if err != nil {
		return nil, "", errs.Wrap(err, errs.Internal, "signing: %v", err)
	}
	hint, _ = provenance.HintForms(fp)
	pb := &protobundle.Bundle{
		MediaType: provenance.BundleMediaType,
		VerificationMaterial: &protobundle.VerificationMaterial{
			Content: &protobundle.VerificationMaterial_PublicKey{PublicKey: &protocommon.PublicKeyIdentifier{Hint: hint}},
		},
		Content: &protobundle.Bundle_MessageSignature{MessageSignature: &protocommon.MessageSignature{
			MessageDigest: &protocommon.HashOutput{Algorithm: algo, Digest: sum},
			Signature:     sig,
		}},
	}
	out, err := protojson.Marshal(pb)
	if err != nil {
		return nil, "", errs.Wrap(err, errs.Internal, "signing: %v", err)
	}
	return out, hint, nil
}

// PublicKeyPEM is the PEM of the public half of a signing key, for trusted_keys.
func PublicKeyPEM(keyPEM []byte) (string, error) {
	priv, err := provenance.ParsePrivateKey(keyPEM)
	if err != nil {
		return "", errs.Wrap(err, errs.Usage, "the signing key can't be read: %v", err)
	}
	pub, err := provenance.PublicPEM(priv.Public())
	return string(pub), err
}
