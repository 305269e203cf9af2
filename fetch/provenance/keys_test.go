package provenance

import (
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
)

func pemOf(t *testing.T, typ string, der []byte) []byte {
	t.Helper()
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// must is for setup that can't fail short of a broken machine.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// The key mistakes people make, each answered with a sentence that says what the file is and
// what to do, never with the parser's asn1 view of the bytes nor the bytes themselves.
func TestBadKeysGetASentence(t *testing.T) {
	rsaKey := must(rsa.GenerateKey(rand.Reader, 2048))
	p384 := must(ecdsa.GenerateKey(elliptic.P384(), rand.Reader))
	p256 := must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader))
	x25519 := must(ecdh.X25519().GenerateKey(rand.Reader))
	p256PKCS8 := pemOf(t, "PRIVATE KEY", must(x509.MarshalPKCS8PrivateKey(p256)))
	p256Pub := pemOf(t, "PUBLIC KEY", must(x509.MarshalPKIXPublicKey(p256.Public())))
	legacyEncrypted := []byte("-----BEGIN EC PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-256-CBC,00112233445566778899AABBCCDDEEFF\n\nAAAA\n-----END EC PRIVATE KEY-----\n")
	private := map[string]struct {
		in   []byte
		says []string
	}{
		"rsa pkcs1":         {pemOf(t, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(rsaKey)), []string{"RSA key", "ECDSA P-256 and Ed25519", "mur key generate"}},
		"rsa pkcs8":         {pemOf(t, "PRIVATE KEY", must(x509.MarshalPKCS8PrivateKey(rsaKey))), []string{"RSA key", "mur key generate"}},
		"encrypted pkcs8":   {pemOf(t, "ENCRYPTED PRIVATE KEY", []byte("not really")), []string{"encrypted private key", "cosign generate-key-pair", "openssl pkey -in KEY -out KEY.plain"}},
		"cosign encrypted":  {pemOf(t, "ENCRYPTED SIGSTORE PRIVATE KEY", []byte("{}")), []string{"encrypted private key"}},
		"legacy encrypted":  {legacyEncrypted, []string{"encrypted private key"}},
		"public for sign":   {p256Pub, []string{"public key, where the private key is needed", "NAME.key"}},
		"not pem":           {[]byte("hello, I am a key\n"), []string{"not PEM", "mur key generate"}},
		"empty":             {nil, []string{"empty"}},
		"openssh public":    {[]byte("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE team@host\n"), []string{"OpenSSH public key"}},
		"openssh private":   {pemOf(t, "OPENSSH PRIVATE KEY", []byte("openssh-key-v1")), []string{"OpenSSH private key", "PKCS#8"}},
		"p384 pkcs8":        {pemOf(t, "PRIVATE KEY", must(x509.MarshalPKCS8PrivateKey(p384))), []string{"ECDSA key on P-384", "P-256 only"}},
		"p384 sec1":         {pemOf(t, "EC PRIVATE KEY", must(x509.MarshalECPrivateKey(p384))), []string{"ECDSA key on P-384"}},
		"x25519":            {pemOf(t, "PRIVATE KEY", must(x509.MarshalPKCS8PrivateKey(x25519))), []string{"X25519", "can't sign"}},
		"damaged":           {pemOf(t, "PRIVATE KEY", []byte{0x30, 0x03, 0x02, 0x01}), []string{"does not parse as a PKCS#8 or SEC 1 private key"}},
		"certificate":       {pemOf(t, "CERTIFICATE", []byte{0x30}), []string{"certificate, not a key"}},
		"another pem block": {pemOf(t, "X509 CRL", []byte{0x30}), []string{`type "X509 CRL"`, "not a private key"}},
	}
	for name, c := range private {
		t.Run("private/"+name, func(t *testing.T) {
			_, err := ParsePrivateKey(c.in)
			wantSentence(t, err, c.in, c.says)
		})
	}
	public := map[string]struct {
		in   []byte
		says []string
	}{
		"private for trust": {p256PKCS8, []string{"private key, where the public key is needed", "NAME.pub", "never belongs in config.yaml"}},
		"sec1 for trust":    {pemOf(t, "EC PRIVATE KEY", must(x509.MarshalECPrivateKey(p256))), []string{"private key, where the public key is needed"}},
		"rsa public":        {pemOf(t, "PUBLIC KEY", must(x509.MarshalPKIXPublicKey(rsaKey.Public()))), []string{"RSA key"}},
		"rsa pkcs1 public":  {pemOf(t, "RSA PUBLIC KEY", x509.MarshalPKCS1PublicKey(&rsaKey.PublicKey)), []string{"RSA key"}},
		"p384 public":       {pemOf(t, "PUBLIC KEY", must(x509.MarshalPKIXPublicKey(p384.Public()))), []string{"ECDSA key on P-384"}},
		"not pem":           {[]byte("MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE"), []string{"not PEM"}},
		"damaged":           {pemOf(t, "PUBLIC KEY", []byte{0x30, 0x03, 0x02, 0x01}), []string{"does not parse as a public key"}},
		"encrypted":         {pemOf(t, "ENCRYPTED PRIVATE KEY", []byte("x")), []string{"encrypted"}},
	}
	for name, c := range public {
		t.Run("public/"+name, func(t *testing.T) {
			_, err := ParsePublicKey(c.in)
			wantSentence(t, err, c.in, c.says)
		})
	}
	// The good ones, including openssl ecparam's parameters block before a SEC 1 key.
	params := pemOf(t, "EC PARAMETERS", []byte{0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07})
	for name, in := range map[string][]byte{
		"pkcs8":           p256PKCS8,
		"sec1":            pemOf(t, "EC PRIVATE KEY", must(x509.MarshalECPrivateKey(p256))),
		"ecparam -genkey": append(params, pemOf(t, "EC PRIVATE KEY", must(x509.MarshalECPrivateKey(p256)))...),
	} {
		if _, err := ParsePrivateKey(in); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := ParsePublicKey(p256Pub); err != nil {
		t.Fatal(err)
	}
}

func wantSentence(t *testing.T, err error, in []byte, says []string) {
	t.Helper()
	var ke *KeyError
	if !errors.As(err, &ke) {
		t.Fatalf("got %v, want a *KeyError", err)
	}
	for _, s := range says {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%q does not say %q", err, s)
		}
	}
	for _, leak := range []string{"asn1", "structure error", "tags don't match", "x509:"} {
		if strings.Contains(err.Error(), leak) {
			t.Errorf("%q quotes the parser (%q)", err, leak)
		}
	}
	if body := pemBody(in); len(body) >= 16 && strings.Contains(err.Error(), body[:16]) {
		t.Errorf("%q quotes the key's bytes", err)
	}
}

func pemBody(in []byte) string {
	lines := strings.Split(string(in), "\n")
	if len(lines) > 1 {
		return lines[1]
	}
	return ""
}

// A hint is one of the two spellings of the key's fingerprint or none at all; any other is
// refused with both spellings named, so that the user can see which one they meant.
func TestKeyHint(t *testing.T) {
	priv, pub, hint, err := GenerateKey(KeyP256)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParsePrivateKey(priv); err != nil {
		t.Fatal(err)
	}
	fp := must(Fingerprint(must(ParsePublicKey(pub))))
	hexHint, b64Hint := HintForms(fp)
	if hint != hexHint || len(hexHint) != 64 || len(b64Hint) != 44 {
		t.Fatalf("hint %q, forms %q %q", hint, hexHint, b64Hint)
	}
	for given, want := range map[string]string{"": hexHint, hexHint: hexHint, strings.ToUpper(hexHint): strings.ToUpper(hexHint), b64Hint: b64Hint} {
		got, err := KeyHint(pub, given)
		if err != nil || got != want {
			t.Fatalf("KeyHint(%q) = %q, %v; want %q", given, got, err, want)
		}
	}
	_, otherPub, otherHint, _ := GenerateKey(KeyEd25519)
	_, err = KeyHint(otherPub, hexHint)
	if err == nil || !strings.Contains(err.Error(), `hint "`+hexHint+`" does not name this key`) || !strings.Contains(err.Error(), otherHint) {
		t.Fatalf("another key's hint: %v", err)
	}
	if _, err := KeyHint(otherPub, strings.ToLower(b64Hint)); err == nil {
		t.Fatal("base64 is case-sensitive, and a lowered one names no key")
	}
	if _, _, _, err := GenerateKey("rsa"); err == nil {
		t.Fatal("GenerateKey made an rsa key")
	}
}

// WriteKeyPair writes the private key for its owner only, the public key for anyone, and never
// replaces a file: with either name taken, nothing is written at all.
func TestWriteKeyPair(t *testing.T) {
	dir := t.TempDir()
	for _, kind := range []string{KeyP256, KeyEd25519} {
		name := filepath.Join(dir, kind)
		kp, err := WriteKeyPair(name, kind)
		if err != nil {
			t.Fatal(err)
		}
		st := must(os.Stat(kp.Private))
		if st.Mode().Perm() != 0o600 {
			t.Fatalf("%s has mode %v, want 0600", kp.Private, st.Mode().Perm())
		}
		if st := must(os.Stat(kp.Public)); st.Mode().Perm() != 0o644 {
			t.Fatalf("%s has mode %v, want 0644: anyone may read a public key", kp.Public, st.Mode().Perm())
		}
		priv := must(ParsePrivateKey(must(os.ReadFile(kp.Private))))
		pub := must(os.ReadFile(kp.Public))
		want := must(PublicPEM(priv.Public()))
		if string(pub) != string(want) {
			t.Fatal("the .pub is not the .key's public half")
		}
		if h, err := KeyHint(pub, ""); err != nil || h != kp.Hint {
			t.Fatalf("hint %q, %v; WriteKeyPair said %q", h, err, kp.Hint)
		}
		again, err := WriteKeyPair(name, kind)
		errtest.WantToken(t, err, errs.Usage, kp.Private+" already exists", "never overwrites")
		if again.Hint != "" || string(must(os.ReadFile(kp.Public))) != string(pub) {
			t.Fatal("a refused WriteKeyPair changed something")
		}
	}
	// Only the .pub is there: the .key is not written either.
	lone := filepath.Join(dir, "lone")
	if err := os.WriteFile(lone+".pub", []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := WriteKeyPair(lone, "")
	errtest.WantToken(t, err, errs.Usage, lone+".pub already exists")
	if _, err := os.Lstat(lone + ".key"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused WriteKeyPair left %s.key: %v", lone, err)
	}
	// A file that appears between the check and the write is not replaced either.
	if err := writeNew(lone+".pub", []byte("theirs"), 0o644); !errors.Is(err, errs.Usage) {
		t.Fatalf("writeNew over an existing file: %v", err)
	}
	if string(must(os.ReadFile(lone+".pub"))) != "mine" {
		t.Fatal("writeNew replaced a file")
	}
	entries := must(os.ReadDir(dir))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Fatalf("a temporary file %s was left behind", e.Name())
		}
	}
}
