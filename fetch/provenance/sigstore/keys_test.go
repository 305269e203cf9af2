package sigstore

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha512"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"strings"
	"testing"

	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/fetch/provenance/sigstore/provenancetest"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
)

func ecdsaPEM(t *testing.T) []byte {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(k)
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

func ed25519PEM(t *testing.T) []byte {
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(k)
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

func TestKeyedBundles(t *testing.T) {
	for name, gen := range map[string]func(*testing.T) []byte{"ecdsa-p256": ecdsaPEM, "ed25519": ed25519PEM} {
		t.Run(name, func(t *testing.T) {
			priv := gen(t)
			b, hint, err := SignDigest(priv, zipDigest, sha512Sum("the grep zip"))
			if err != nil {
				t.Fatal(err)
			}
			pub, err := PublicKeyPEM(priv)
			if err != nil {
				t.Fatal(err)
			}
			roots, err := mustEmbedded(t).WithKeys([]TrustedKey{{Hint: hint, PEM: pub}})
			if err != nil {
				t.Fatal(err)
			}
			want := acmeExpect()
			want.SHA512 = sha512Sum("the grep zip")
			facts, err := Verify(b, zipDigest, want, roots)
			if err != nil {
				t.Fatalf("keyed bundle: %v", err)
			}
			if facts.Kind != KindKey || facts.Signer != hint {
				t.Fatalf("facts = %+v", facts)
			}
			if !provenance.Names(b, zipDigest) || (name == "ecdsa-p256" && provenance.Names(b, otherDigest)) {
				t.Fatal("Names does not tell a message signature's digest apart")
			}
			if provenance.NeedsSHA512(b) != (name == "ed25519") {
				t.Fatal("NeedsSHA512 is wrong")
			}
			// The same bundle for another artifact, an untrusted key, a key under the hint
			// that is not the signer's.
			other := want
			other.SHA512 = sha512Sum("another artifact")
			if _, err := Verify(b, otherDigest, other, roots); !errors.Is(err, errs.ProvenanceMismatch) {
				t.Fatalf("other artifact: %v", err)
			}
			if _, err := Verify(b, zipDigest, want, mustEmbedded(t)); !errors.Is(err, errs.ProvenanceUnverifiable) || !strings.Contains(err.Error(), "trusted_keys") {
				t.Fatalf("no trusted key: %v", err)
			}
			// A hint is bound to its key: an entry that files another key under this
			// bundle's hint is refused, and a bundle of another key that claims the trusted
			// key's hint fails its signature.
			otherPriv := gen(t)
			otherPub, _ := PublicKeyPEM(otherPriv)
			_, err = mustEmbedded(t).WithKeys([]TrustedKey{{Hint: hint, PEM: otherPub}})
			errtest.WantToken(t, err, errs.InvalidConfig, "trusted_keys entry 1", `hint "`+hint+`"`, "does not name this key")
			forged, _, err := SignDigest(otherPriv, zipDigest, sha512Sum("the grep zip"))
			if err != nil {
				t.Fatal(err)
			}
			_, otherHint, _ := SignDigest(otherPriv, zipDigest, sha512Sum("the grep zip"))
			forged = []byte(strings.Replace(string(forged), otherHint, hint, 1))
			if _, err := Verify(forged, zipDigest, want, roots); !errors.Is(err, errs.ProvenanceMismatch) {
				t.Fatalf("another key's bundle under the trusted hint: %v", err)
			}
		})
	}
}

func TestSignDigestRefusesOtherKeys(t *testing.T) {
	k, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	der, _ := x509.MarshalPKCS8PrivateKey(k)
	p384 := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	for name, in := range map[string][]byte{"p384": p384, "not pem": []byte("hello")} {
		if _, _, err := SignDigest(in, zipDigest, nil); !errors.Is(err, errs.Usage) {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if _, err := mustEmbedded(t).WithKeys([]TrustedKey{{Hint: "x", PEM: "nope"}}); !errors.Is(err, errs.InvalidConfig) {
		t.Fatalf("bad trusted key: %v", err)
	}
}

func sha512Sum(s string) []byte {
	h := sha512.Sum512([]byte(s))
	return h[:]
}

// Only P-256 among the ECDSA curves: sigstore-go would verify a P-384 signature just as well,
// but mur promises one curve, the one cosign and mur push --sign-key make.
func TestWithKeysRefusesOtherCurves(t *testing.T) {
	for _, curve := range []elliptic.Curve{elliptic.P224(), elliptic.P384(), elliptic.P521()} {
		k, err := ecdsa.GenerateKey(curve, rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		der, err := x509.MarshalPKIXPublicKey(k.Public())
		if err != nil {
			t.Fatal(err)
		}
		pub := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
		_, err = mustEmbedded(t).WithKeys([]TrustedKey{{PEM: pub}})
		errtest.WantToken(t, err, errs.InvalidConfig, "trusted_keys entry 1", "ECDSA key on P-", "P-256 only")
	}
}

// trusted_keys add keyed bundles to what the roots check, and take nothing away: with a key
// configured, an attestation still verifies against the roots it came with, and the keyed
// bundle against the key, in process and through Local as the helper serves them.
func TestKeysKeepAttestationRoots(t *testing.T) {
	c := provenancetest.NewCA(t, "GitHub, Inc.")
	attestation := c.Mint(t, provenancetest.Statement(zipDigest.Encoded(), SLSAProvenanceV1), provenancetest.GoodLeaf())
	priv := ecdsaPEM(t)
	keyed, hint, err := SignDigest(priv, zipDigest, nil)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := PublicKeyPEM(priv)
	if err != nil {
		t.Fatal(err)
	}
	keys := []TrustedKey{{Hint: hint, PEM: pub}}
	roots, err := NewRoots(c.Material()).WithKeys(keys)
	if err != nil {
		t.Fatal(err)
	}
	if facts, err := Verify(attestation, zipDigest, acmeExpect(), roots); err != nil || facts.Kind != KindGitHub {
		t.Fatalf("attestation with trusted_keys set: %+v, %v", facts, err)
	}
	if facts, err := Verify(keyed, zipDigest, acmeExpect(), roots); err != nil || facts.Kind != KindKey {
		t.Fatalf("keyed bundle: %+v, %v", facts, err)
	}
	l := &Local{Roots: NewRoots(c.Material())}
	for name, b := range map[string][]byte{"attestation": attestation, "keyed": keyed} {
		if _, err := l.Verify(t.Context(), b, zipDigest, acmeExpect(), provenance.Trust{Keys: keys}); err != nil {
			t.Fatalf("%s through Local with trusted_keys: %v", name, err)
		}
	}
}

// cosign names a key by the base64 of its fingerprint, mur by its hex: a trusted_keys entry
// finds a bundle that carries either, whichever form (or none) the entry's hint is written in.
func TestTrustedKeysMatchHexAndBase64Hints(t *testing.T) {
	priv := ecdsaPEM(t)
	pub, err := PublicKeyPEM(priv)
	if err != nil {
		t.Fatal(err)
	}
	b, hexHint, err := SignDigest(priv, zipDigest, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := provenance.ParsePublicKey([]byte(pub))
	fp, _ := provenance.Fingerprint(p)
	_, b64Hint := provenance.HintForms(fp)
	cosignStyle := []byte(strings.Replace(string(b), hexHint, b64Hint, 1))
	for _, entry := range []string{"", hexHint, strings.ToUpper(hexHint), b64Hint} {
		roots, err := mustEmbedded(t).WithKeys([]TrustedKey{{Hint: entry, PEM: pub}})
		if err != nil {
			t.Fatalf("entry hint %q: %v", entry, err)
		}
		for bundleName, bundle := range map[string][]byte{"hex": b, "base64": cosignStyle} {
			facts, err := Verify(bundle, zipDigest, acmeExpect(), roots)
			if err != nil {
				t.Fatalf("entry hint %q, %s bundle hint: %v", entry, bundleName, err)
			}
			if facts.Kind != KindKey {
				t.Fatalf("facts = %+v", facts)
			}
		}
	}
	// A key nothing trusts is named once in the message, by its entry's hint.
	other, _ := PublicKeyPEM(ecdsaPEM(t))
	otherHint, _ := provenance.KeyHint([]byte(other), "")
	roots, _ := mustEmbedded(t).WithKeys([]TrustedKey{{PEM: other}})
	_, err = Verify(b, zipDigest, acmeExpect(), roots)
	errtest.WantToken(t, err, errs.ProvenanceUnverifiable, "is signed by key "+hexHint+"; scope acme trusts "+otherHint+"; ")
}
