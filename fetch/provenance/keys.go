package provenance

import (
	"crypto"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
)

// The key types mur signs with. P-256 is the default because cosign reads mur's P-256 bundles
// and not its Ed25519 ones (mur signs those as Ed25519ph, which cosign does not check).
const (
	KeyP256    = "ecdsa-p256"
	KeyEd25519 = "ed25519"
)

// KeyError says what is wrong with a key in a sentence, never quoting the key or the parser's
// view of its bytes (an asn1 dump helps nobody, and the bytes may be a secret).
type KeyError struct{ Problem string }

func (e *KeyError) Error() string { return e.Problem }

func keyErr(format string, args ...any) error {
	return &KeyError{Problem: fmt.Sprintf(format, args...)}
}

const makeOne = "make a key pair with 'mur key generate NAME'"

// blockOf finds the PEM block of data and says in words what it is when it is not a key mur
// reads. wantPrivate tells which half the caller expects, for the sentence about the other one.
func blockOf(data []byte, wantPrivate bool) (*pem.Block, error) {
	block, rest := pem.Decode(data)
	// openssl ecparam -genkey writes the curve's parameters before the key itself.
	for block != nil && block.Type == "EC PARAMETERS" {
		block, rest = pem.Decode(rest)
	}
	if block == nil {
		text := strings.TrimSpace(string(data))
		switch {
		case len(text) == 0:
			return nil, keyErr("it is empty; %s", makeOne)
		case strings.HasPrefix(text, "ssh-"), strings.HasPrefix(text, "ecdsa-sha2-"):
			return nil, keyErr("it is an OpenSSH public key, not PEM; mur reads PEM keys (-----BEGIN PUBLIC KEY-----); %s", makeOne)
		}
		return nil, keyErr("it is not PEM (no -----BEGIN … KEY----- line); %s", makeOne)
	}
	t := block.Type
	switch {
	case strings.Contains(t, "ENCRYPTED") || block.Headers["Proc-Type"] != "":
		return nil, keyErr("it is an encrypted private key (%s), as cosign generate-key-pair and openssl -aes256 write; mur reads only unencrypted keys: decrypt it with 'openssl pkey -in KEY -out KEY.plain', or %s", t, makeOne)
	case strings.HasPrefix(t, "RSA "):
		return nil, keyErr("it is an RSA key (%s); mur signs and trusts ECDSA P-256 and Ed25519 keys only; %s", t, makeOne)
	case t == "OPENSSH PRIVATE KEY":
		return nil, keyErr("it is an OpenSSH private key; mur reads PKCS#8 PEM (-----BEGIN PRIVATE KEY-----); %s", makeOne)
	case t == "CERTIFICATE":
		return nil, keyErr("it is a certificate, not a key; give the key itself")
	case wantPrivate && t == "PUBLIC KEY":
		return nil, keyErr("it is a public key, where the private key is needed: sign with the private half (NAME.key), and give the public half (NAME.pub) to trusted_keys")
	case !wantPrivate && strings.HasSuffix(t, "PRIVATE KEY"):
		return nil, keyErr("it is a private key, where the public key is needed: trusted_keys takes the public half (NAME.pub, or 'openssl pkey -in KEY -pubout'), and the private key never belongs in config.yaml")
	case wantPrivate && t != "PRIVATE KEY" && t != "EC PRIVATE KEY":
		return nil, keyErr("it is a PEM block of type %q, not a private key (-----BEGIN PRIVATE KEY-----); %s", t, makeOne)
	case !wantPrivate && t != "PUBLIC KEY":
		return nil, keyErr("it is a PEM block of type %q, not a public key (-----BEGIN PUBLIC KEY-----)", t)
	}
	return block, nil
}

// checkKey refuses every key type and curve mur does not sign or verify with.
func checkKey(k any) error {
	switch k := k.(type) {
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return keyErr("it is an ECDSA key on %s; mur uses ECDSA on P-256 only (or Ed25519); %s", k.Curve.Params().Name, makeOne)
		}
	case *ecdsa.PrivateKey:
		return checkKey(&k.PublicKey)
	case ed25519.PublicKey, ed25519.PrivateKey:
	case *rsa.PublicKey, *rsa.PrivateKey:
		return keyErr("it is an RSA key; mur signs and trusts ECDSA P-256 and Ed25519 keys only; %s", makeOne)
	case *ecdh.PublicKey, *ecdh.PrivateKey:
		return keyErr("it is an X25519 (ECDH) key, which agrees on secrets and can't sign; mur signs and trusts ECDSA P-256 and Ed25519 keys only; %s", makeOne)
	default:
		return keyErr("it is a key of a type mur does not use (%T); mur signs and trusts ECDSA P-256 and Ed25519 keys only; %s", k, makeOne)
	}
	return nil
}

// ParsePrivateKey reads a signing key: an unencrypted ECDSA P-256 or Ed25519 private key in PEM
// (PKCS#8, or SEC 1 for ECDSA). Every refusal is a *KeyError.
func ParsePrivateKey(data []byte) (crypto.Signer, error) {
	block, err := blockOf(data, true)
	if err != nil {
		return nil, err
	}
	var priv any
	if block.Type == "EC PRIVATE KEY" {
		priv, err = x509.ParseECPrivateKey(block.Bytes)
	} else {
		priv, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	}
	if err != nil {
		// An EC key on a curve Go does not know (secp256k1, say) lands here too.
		return nil, keyErr("its %s block does not parse as a PKCS#8 or SEC 1 private key (damaged, or a curve mur does not use); %s", block.Type, makeOne)
	}
	if err := checkKey(priv); err != nil {
		return nil, err
	}
	return priv.(crypto.Signer), nil // checkKey admits ECDSA and Ed25519 keys only
}

// ParsePublicKey reads a trusted key: an ECDSA P-256 or Ed25519 public key in PEM (PKIX, as
// 'openssl pkey -pubout', cosign and mur key generate write it). Every refusal is a *KeyError.
func ParsePublicKey(data []byte) (crypto.PublicKey, error) {
	block, err := blockOf(data, false)
	if err != nil {
		return nil, err
	}
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, keyErr("its PUBLIC KEY block does not parse as a public key (damaged, or a curve mur does not use); %s", makeOne)
	}
	if err := checkKey(pub); err != nil {
		return nil, err
	}
	return pub, nil
}

// Fingerprint is the SHA-256 of the public key's PKIX DER encoding: what a keyed bundle's hint
// names, in hex (mur's form) or base64 (cosign's).
func Fingerprint(pub crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(der)
	return sum[:], nil
}

// HintForms are the two spellings of a fingerprint that bundles carry as their hint: hex, as
// mur push writes it, and standard base64, as cosign sign-blob does.
func HintForms(fp []byte) (hexHint, base64Hint string) {
	return hex.EncodeToString(fp), base64.StdEncoding.EncodeToString(fp)
}

// HintMatches reports whether hint names the key of fingerprint fp, in either form.
func HintMatches(hint string, fp []byte) bool {
	h, b := HintForms(fp)
	return strings.EqualFold(hint, h) || hint == b
}

// KeyHint checks a trusted key's PEM against the hint its entry gives, and returns the hint to
// use: the given one when it names the key, the key's hex fingerprint when none is given.
func KeyHint(pemData []byte, given string) (string, error) {
	pub, err := ParsePublicKey(pemData)
	if err != nil {
		return "", err
	}
	fp, err := Fingerprint(pub)
	if err != nil {
		return "", keyErr("its public key can't be encoded: %v", err)
	}
	h, b := HintForms(fp)
	switch {
	case given == "":
		return h, nil
	case HintMatches(given, fp):
		return given, nil
	}
	return "", keyErr("its hint %q does not name this key, whose fingerprint is %s (hex) or %s (base64); remove the hint line (mur computes it from the key), or give the key the hint belongs to", given, h, b)
}

// PublicPEM is the PEM of the public half of a key.
func PublicPEM(pub crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// GenerateKey makes a key pair of kind (KeyP256 or KeyEd25519): the private key as unencrypted
// PKCS#8 PEM and the public key as PKIX PEM, with its hint (hex fingerprint).
func GenerateKey(kind string) (privPEM, pubPEM []byte, hint string, err error) {
	var priv crypto.Signer
	switch kind {
	case KeyP256, "":
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case KeyEd25519:
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	default:
		return nil, nil, "", errors.New("the key type must be " + KeyP256 + " or " + KeyEd25519 + ", found " + fmt.Sprintf("%q", kind))
	}
	if err != nil {
		return nil, nil, "", err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, nil, "", err
	}
	if pubPEM, err = PublicPEM(priv.Public()); err != nil {
		return nil, nil, "", err
	}
	fp, err := Fingerprint(priv.Public())
	if err != nil {
		return nil, nil, "", err
	}
	hint, _ = HintForms(fp)
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), pubPEM, hint, nil
}
