package pulltest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"os"
	"testing"

	"github.com/murmur-nexus/mur/fetch/provenance/sigstore"
	"github.com/murmur-nexus/mur/fetch/publish"
)

// ECDSAKey is a fresh P-256 signing key, as PKCS #8 PEM, and its public PEM for trusted_keys.
func ECDSAKey(t *testing.T) (priv []byte, pub string) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(k)
	priv = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	pub, err = sigstore.PublicKeyPEM(priv)
	if err != nil {
		t.Fatal(err)
	}
	return priv, pub
}

// SignedGrep packs acme/grep@1.2.0 from seed and signs it with a fresh P-256 key, as mur push
// --sign-key does: the packed artifact, the item to push, the local verifier that checks it, and
// the key's hint and public PEM for trusted_keys.
func SignedGrep(t *testing.T, seed uint64) (Packed, publish.Item, *sigstore.Local, string, string) {
	t.Helper()
	p := Pack(t, "grep", "1.2.0", seed)
	path := t.TempDir() + "/grep-1.2.0.mur.zip"
	if err := os.WriteFile(path, p.Zip, 0o644); err != nil {
		t.Fatal(err)
	}
	item, err := publish.FromFile(path, "acme", "any")
	if err != nil {
		t.Fatal(err)
	}
	priv, pub := ECDSAKey(t)
	local := &sigstore.Local{}
	hint, err := publish.Sign(context.Background(), local, &item, priv)
	if err != nil {
		t.Fatal(err)
	}
	return p, item, local, hint, pub
}
