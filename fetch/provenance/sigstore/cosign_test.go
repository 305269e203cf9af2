package sigstore

import (
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/internal/errs"
)

// keyedTrustedRoot is the trusted root cosign verify-blob reads bundles against offline: a keyed
// bundle with --insecure-ignore-tlog checks only the key, so the root needs no authority and no
// log, but cosign 2 refuses a new-format bundle without one (docs/interop.md).
const keyedTrustedRoot = `{"mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1"}` + "\n"

// cosignTool finds cosign, or skips; with CI set it fails instead, since .ci/run installs it.
func cosignTool(t *testing.T) (path string, newFormat []string) {
	t.Helper()
	cosign, err := exec.LookPath("cosign")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("cosign is not on PATH, and CI is set: .ci/run installs github.com/sigstore/cosign/v2/cmd/cosign@v2.6.5")
		}
		t.Skip("cosign is not installed; go install github.com/sigstore/cosign/v2/cmd/cosign@v2.6.5 to run this interop test")
	}
	ver, _ := exec.Command(cosign, "version").CombinedOutput()
	// cosign 2 reads Sigstore bundles (v0.3) only when asked; cosign 3 reads them by default.
	if strings.Contains(string(ver), "v2.") {
		newFormat = []string{"--new-bundle-format"}
	}
	return cosign, newFormat
}

// offline runs cosign with no way to reach TUF, Rekor or anything else, and its own home.
func offline(t *testing.T, dir, cosign string, args ...string) ([]byte, error) {
	t.Helper()
	c := exec.Command(cosign, args...)
	c.Dir = dir
	c.Env = append(os.Environ(), "HOME="+dir, "TUF_ROOT="+filepath.Join(dir, "tuf"), "COSIGN_PASSWORD=",
		"HTTPS_PROXY=http://127.0.0.1:1", "HTTP_PROXY=http://127.0.0.1:1", "NO_PROXY=")
	return c.CombinedOutput()
}

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCosignVerifiesKeyedBundles: `cosign verify-blob --key --bundle --trusted-root` accepts the
// P-256 keyed bundle `mur push --sign-key` attaches, and refuses it for another file. cosign
// can't check mur's Ed25519 bundles (Ed25519ph over the SHA-512; cosign verifies Ed25519 blobs
// as pure Ed25519), which docs/interop.md says and this test holds it to.
func TestCosignVerifiesKeyedBundles(t *testing.T) {
	cosign, format := cosignTool(t)
	for name, c := range map[string]struct {
		gen      func(*testing.T) []byte
		verified bool
	}{"ecdsa-p256": {ecdsaPEM, true}, "ed25519": {ed25519PEM, false}} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			blob := []byte("the grep zip, as pushed " + name)
			sum := sha512.Sum512(blob)
			priv := c.gen(t)
			b, _, err := SignDigest(priv, digest.FromBytes(blob), sum[:])
			if err != nil {
				t.Fatal(err)
			}
			pub, err := PublicKeyPEM(priv)
			if err != nil {
				t.Fatal(err)
			}
			blobFile, bundleFile, keyFile := writeFile(t, dir, "grep.mur.zip", blob), writeFile(t, dir, "grep.sigstore.json", b), writeFile(t, dir, "team.pub", []byte(pub))
			rootFile := writeFile(t, dir, "trusted_root.json", []byte(keyedTrustedRoot))
			other := writeFile(t, dir, "other.mur.zip", []byte("another artifact"))
			verify := func(file string) ([]byte, error) {
				args := append([]string{"verify-blob", "--key", keyFile, "--bundle", bundleFile, "--trusted-root", rootFile, "--insecure-ignore-tlog=true"}, format...)
				return offline(t, dir, cosign, append(args, file)...)
			}
			out, err := verify(blobFile)
			switch {
			case c.verified && (err != nil || !strings.Contains(string(out), "Verified OK")):
				t.Fatalf("cosign verify-blob refuses mur's keyed bundle: %v\n%s", err, out)
			case !c.verified && err == nil:
				t.Fatalf("cosign verify-blob now accepts mur's %s bundle: docs/interop.md says it can't; update it\n%s", name, out)
			case !c.verified && !strings.Contains(string(out), "failed to verify signature"):
				t.Fatalf("cosign verify-blob refuses mur's %s bundle, but not for its signature: %v\n%s", name, err, out)
			}
			if out, err := verify(other); err == nil {
				t.Fatalf("cosign verify-blob accepts the bundle for another file:\n%s", out)
			}
		})
	}
}

// TestMurVerifiesCosignBundles: a bundle `cosign sign-blob --new-bundle-format` makes with a
// P-256 key from `cosign generate-key-pair` verifies in mur when trusted_keys names the key by
// the hint cosign writes (the base64 of its SHA-256 fingerprint), and not for another artifact,
// nor under another key.
func TestMurVerifiesCosignBundles(t *testing.T) {
	cosign, format := cosignTool(t)
	dir := t.TempDir()
	if out, err := offline(t, dir, cosign, "generate-key-pair"); err != nil {
		t.Fatalf("cosign generate-key-pair: %v\n%s", err, out)
	}
	blob := []byte("the grep zip, as cosign signed it")
	blobFile := writeFile(t, dir, "grep.mur.zip", blob)
	args := append([]string{"sign-blob", "--key", "cosign.key", "--bundle", "grep.sigstore.json", "--tlog-upload=false", "--yes"}, format...)
	if out, err := offline(t, dir, cosign, append(args, blobFile)...); err != nil {
		t.Fatalf("cosign sign-blob: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "grep.sigstore.json"))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := os.ReadFile(filepath.Join(dir, "cosign.pub"))
	if err != nil {
		t.Fatal(err)
	}
	var shape struct {
		VerificationMaterial struct {
			PublicKey struct {
				Hint string `json:"hint"`
			} `json:"publicKey"`
		} `json:"verificationMaterial"`
	}
	if err := json.Unmarshal(b, &shape); err != nil {
		t.Fatalf("cosign's bundle: %v\n%s", err, b)
	}
	hint := shape.VerificationMaterial.PublicKey.Hint
	block, _ := pem.Decode(pub)
	if block == nil {
		t.Fatalf("cosign.pub is not PEM:\n%s", pub)
	}
	fp := sha256.Sum256(block.Bytes)
	if _, err := x509.ParsePKIXPublicKey(block.Bytes); err != nil || hint != base64.StdEncoding.EncodeToString(fp[:]) {
		t.Fatalf("cosign's hint %q is not the base64 SHA-256 of cosign.pub's key (%v)", hint, err)
	}
	want := Expect{Artifact: "acme/grep@1.2.0", Scope: "acme"}
	// trusted_keys may name the key by cosign's base64 fingerprint or by mur's hex one; the
	// bundle's own hint (base64) is what the lock records either way.
	for _, named := range []string{hint, hex.EncodeToString(fp[:])} {
		roots, err := mustEmbedded(t).WithKeys([]TrustedKey{{Hint: named, PEM: string(pub)}})
		if err != nil {
			t.Fatal(err)
		}
		facts, err := Verify(b, digest.FromBytes(blob), want, roots)
		if err != nil {
			t.Fatalf("mur refuses cosign's bundle with trusted_keys hint %s: %v\n%s", named, err, b)
		}
		if facts.Kind != KindKey || facts.Signer != hint {
			t.Fatalf("facts %+v, want a key signature by %s", facts, hint)
		}
		if _, err := Verify(b, digest.FromBytes([]byte("another artifact")), want, roots); !errors.Is(err, errs.ProvenanceMismatch) {
			t.Fatalf("cosign's bundle for another artifact: %v, want provenance-mismatch", err)
		}
	}
	otherPub, err := PublicKeyPEM(ecdsaPEM(t))
	if err != nil {
		t.Fatal(err)
	}
	// Another key under cosign's hint is refused when trusted_keys is read, before any bundle.
	if _, err := mustEmbedded(t).WithKeys([]TrustedKey{{Hint: hint, PEM: otherPub}}); !errors.Is(err, errs.InvalidConfig) {
		t.Fatalf("another key under cosign's hint: %v, want invalid-config", err)
	}
	// Another key under its own name does not verify cosign's bundle.
	other, err := mustEmbedded(t).WithKeys([]TrustedKey{{PEM: otherPub}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(b, digest.FromBytes(blob), want, other); err == nil {
		t.Fatal("cosign's bundle verified under a key that did not sign it")
	}
}
