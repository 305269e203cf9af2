package sigstore

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
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

// WithKeys returns roots that also trust keys for keyed bundles (`mur push --sign-key`).
func (r *Roots) WithKeys(keys []TrustedKey) (*Roots, error) {
	out := &Roots{source: r.describe()}
	if r != nil {
		out.instances = r.instances
	}
	out.keys = map[string]trustedKey{}
	for _, k := range keys {
		if k.Hint == "" {
			return nil, errs.New(errs.InvalidConfig, "a trusted_keys entry has no hint; give each key the hint its bundles carry (mur push --sign-key prints it)")
		}
		pub, err := parsePublicKey([]byte(k.PEM))
		if err != nil {
			return nil, errs.Wrap(err, errs.InvalidConfig, "trusted_keys entry %q: %v; give the PEM of an ECDSA P-256 or Ed25519 public key", k.Hint, err)
		}
		v, err := keyVerifier(pub)
		if err != nil {
			return nil, errs.Wrap(err, errs.InvalidConfig, "trusted_keys entry %q: %v", k.Hint, err)
		}
		out.keys[k.Hint] = trustedKey{verifier: v}
	}
	return out, nil
}

func parsePublicKey(data []byte) (crypto.PublicKey, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errs.New(errs.InvalidConfig, "no PEM block")
	}
	return x509.ParsePKIXPublicKey(block.Bytes)
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

type expiringVerifier struct{ signature.Verifier }

func (expiringVerifier) ValidAtTime(time.Time) bool { return true }

func verifyKeyed(b *bundle.Bundle, vc verify.VerificationContent, sum []byte, want Expect, roots *Roots) (Facts, error) {
	hint := ""
	if pk := vc.PublicKey(); pk != nil {
		hint = pk.Hint()
	}
	if roots == nil || roots.keys == nil {
		return Facts{}, keyHintError(want, hint, roots)
	}
	k, ok := roots.keys[hint]
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
			want.Artifact, clean(hint), clean(err.Error()))
	}
	return Facts{Kind: KindKey, Signer: hint}, nil
}

// SignDigest signs an artifact with a PEM private key (ECDSA P-256 or Ed25519, PKCS#8 or SEC 1)
// and returns a bundle v0.3 with a publicKey hint and a messageSignature, the shape
// `cosign verify-blob --bundle --key` accepts. The hint is the key's SHA-256 fingerprint.
// ECDSA signs the zip's SHA-256 digest. Ed25519 can only sign a SHA-512 digest (Ed25519ph), so
// it signs sha512sum, the zip's SHA-512, which may be nil for ECDSA keys.
func SignDigest(keyPEM []byte, artifact digest.Digest, sha512sum []byte) (bundleJSON []byte, hint string, err error) {
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return nil, "", errs.New(errs.Usage, "the signing key is not PEM; give an ECDSA P-256 or Ed25519 private key")
	}
	var priv any
	if strings.Contains(block.Type, "EC PRIVATE KEY") {
		priv, err = x509.ParseECPrivateKey(block.Bytes)
	} else {
		priv, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	}
	if err != nil {
		return nil, "", errs.Wrap(err, errs.Usage, "the signing key does not parse: %v; give an unencrypted ECDSA P-256 or Ed25519 private key in PEM", err)
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
	case *ecdsa.PrivateKey:
		if k.Curve != elliptic.P256() {
			return nil, "", errs.New(errs.Usage, "the signing key is ECDSA on %s; mur signs with P-256", k.Curve.Params().Name)
		}
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
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, "", errs.Wrap(err, errs.Internal, "signing: %v", err)
	}
	fp := sha256.Sum256(der)
	hint = hex.EncodeToString(fp[:])
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
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return "", errs.New(errs.Usage, "the signing key is not PEM")
	}
	var priv any
	var err error
	if strings.Contains(block.Type, "EC PRIVATE KEY") {
		priv, err = x509.ParseECPrivateKey(block.Bytes)
	} else {
		priv, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	}
	if err != nil {
		return "", errs.Wrap(err, errs.Usage, "the signing key does not parse: %v", err)
	}
	s, ok := priv.(crypto.Signer)
	if !ok {
		return "", errs.New(errs.Usage, "the signing key can't sign")
	}
	der, err := x509.MarshalPKIXPublicKey(s.Public())
	if err != nil {
		return "", err
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})), nil
}
