// keygen makes the demo's signing key, with nothing but Go: an Ed25519 key pair written as
// NAME.key (PKCS#8, what mur push --sign-key reads) and NAME.pub (PKIX), and on stdout the
// config.yaml that trusts it for SCOPE and requires provenance there.
//
//	go run ./testdata/demo/keygen NAME SCOPE > $MURMUR_HOME/config.yaml
//
// The DER of an Ed25519 key is a fixed prefix and the 32 key bytes (RFC 8410), written out here
// so that the program links no crypto/x509 and builds in a moment on a cold cache.
package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"os"
	"strings"
)

var (
	pkcs8Prefix = []byte{0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20}
	pkixPrefix  = []byte{0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00}
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: keygen NAME SCOPE > config.yaml")
		os.Exit(2)
	}
	name, scope := os.Args[1], os.Args[2]
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		fail(err)
	}
	keyDER := append(append([]byte{}, pkcs8Prefix...), priv.Seed()...)
	pubDER := append(append([]byte{}, pkixPrefix...), pub...)
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	if err := os.WriteFile(name+".key", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		fail(err)
	}
	if err := os.WriteFile(name+".pub", pubPEM, 0o644); err != nil {
		fail(err)
	}
	// The hint is the SHA-256 of the public key's DER, as mur push prints it.
	sum := sha256.Sum256(pubDER)
	indented := "          " + strings.ReplaceAll(strings.TrimSpace(string(pubPEM)), "\n", "\n          ")
	fmt.Printf("scopes:\n  %s:\n    provenance: require\n    trusted_keys:\n      - hint: %s\n        pem: |\n%s\n", scope, hex.EncodeToString(sum[:]), indented)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "keygen:", err)
	os.Exit(1)
}
