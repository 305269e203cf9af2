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
	"github.com/murmur-nexus/mur/internal/errs"
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
			otherPub, _ := PublicKeyPEM(gen(t))
			impostor, _ := mustEmbedded(t).WithKeys([]TrustedKey{{Hint: hint, PEM: otherPub}})
			if _, err := Verify(b, zipDigest, want, impostor); !errors.Is(err, errs.ProvenanceMismatch) {
				t.Fatalf("wrong key under the hint: %v", err)
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
