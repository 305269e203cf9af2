package sigstore

import (
	"crypto/sha512"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
)

// TestCosignVerifiesKeyedBundles: `cosign verify-blob --bundle --key` accepts the keyed bundle
// `mur push --sign-key` attaches, for both key types, and refuses it for another file. cosign
// takes about 30 minutes to build here, so the test runs only where it is installed.
func TestCosignVerifiesKeyedBundles(t *testing.T) {
	cosign, err := exec.LookPath("cosign")
	if err != nil {
		t.Skip("cosign is not installed; install github.com/sigstore/cosign/v2/cmd/cosign to run this interop test")
	}
	ver, _ := exec.Command(cosign, "version").CombinedOutput()
	// cosign 2 reads Sigstore bundles (v0.3) only when asked; cosign 3 reads them by default.
	var format []string
	if strings.Contains(string(ver), "v2.") {
		format = []string{"--new-bundle-format"}
	}
	for name, gen := range map[string]func(*testing.T) []byte{"ecdsa-p256": ecdsaPEM, "ed25519": ed25519PEM} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			blob := []byte("the grep zip, as pushed " + name)
			sum := sha512.Sum512(blob)
			priv := gen(t)
			b, _, err := SignDigest(priv, digest.FromBytes(blob), sum[:])
			if err != nil {
				t.Fatal(err)
			}
			pub, err := PublicKeyPEM(priv)
			if err != nil {
				t.Fatal(err)
			}
			write := func(name string, data []byte) string {
				p := filepath.Join(dir, name)
				if err := os.WriteFile(p, data, 0o644); err != nil {
					t.Fatal(err)
				}
				return p
			}
			blobFile, bundleFile, keyFile := write("grep.mur.zip", blob), write("grep.sigstore.json", b), write("team.pub", []byte(pub))
			other := write("other.mur.zip", []byte("another artifact"))
			verify := func(file string) ([]byte, error) {
				args := append([]string{"verify-blob", "--key", keyFile, "--bundle", bundleFile, "--insecure-ignore-tlog=true"}, format...)
				c := exec.Command(cosign, append(args, file)...)
				// Offline: nothing may come from TUF or Rekor.
				c.Env = append(os.Environ(), "TUF_ROOT="+filepath.Join(dir, "tuf"), "HTTPS_PROXY=http://127.0.0.1:1", "HTTP_PROXY=http://127.0.0.1:1")
				return c.CombinedOutput()
			}
			if out, err := verify(blobFile); err != nil {
				t.Fatalf("cosign verify-blob refuses mur's keyed bundle (%s): %v\n%s", strings.TrimSpace(string(ver)), err, out)
			}
			if out, err := verify(other); err == nil {
				t.Fatalf("cosign verify-blob accepts the bundle for another file:\n%s", out)
			}
		})
	}
}
