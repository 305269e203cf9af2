package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
	"github.com/murmur-nexus/mur/internal/ref"
)

// TestProvenanceOrasInterop: on Debian's docker-registry (no referrers API), `mur push
// --sign-key` attaches a keyed bundle that `oras discover` sees as a
// application/vnd.dev.sigstore.bundle.v0.3+json referrer; and a bundle `oras attach` adds to an
// unsigned artifact is found and verified by `mur pull` under provenance: require.
func TestProvenanceOrasInterop(t *testing.T) {
	t.Parallel()
	needOras(t)
	reg := registrytest.Start(t)
	w := newWorld(t)
	dir := t.TempDir()
	zip := artifacttest.File(t, dir, "notes", "1.0.0", artifacttest.Module(4096, 7))
	keyFile, pubPEM := teamKey(t, dir)

	signed := "oci://" + reg.Addr() + "/signed"
	out := w.ok("push", "--json", zip, "--scope", "demo", "--sign-key", keyFile, "--store", signed)
	var pushedAll struct {
		Results []struct {
			Hint string `json:"signed_with"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(out.stdout), &pushedAll); err != nil || len(pushedAll.Results) != 1 || pushedAll.Results[0].Hint == "" {
		t.Fatalf("push --json: %v\n%s", err, out.stdout)
	}
	pushed := pushedAll.Results[0]
	disc, err := exec.Command("oras", "discover", "--plain-http", "--format", "json", reg.Addr()+"/signed/demo/notes:1.0.0").CombinedOutput()
	if err != nil || !strings.Contains(string(disc), "application/vnd.dev.sigstore.bundle.v0.3+json") {
		t.Fatalf("oras discover does not see the bundle: %v\n%s", err, disc)
	}

	// The bundle, as a file, attached by oras to an unsigned copy of the artifact.
	st, err := ocistore.Open(signed, ocistore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	zipBytes := readFile(t, zip)
	bundles, err := st.(store.BundleFinder).Bundles(context.Background(), ref.Name{Scope: "demo", Name: "notes"}, "1.0.0", digest.FromBytes(zipBytes))
	if err != nil || len(bundles) != 1 {
		t.Fatalf("bundles: %d, %v", len(bundles), err)
	}
	bundleFile := filepath.Join(dir, "notes.sigstore.json")
	os.WriteFile(bundleFile, bundles[0], 0o644)
	plain := "oci://" + reg.Addr() + "/plain"
	w.ok("push", zip, "--scope", "demo", "--store", plain)
	attach := exec.Command("oras", "attach", "--plain-http", "--artifact-type", "application/vnd.dev.sigstore.bundle.v0.3+json",
		reg.Addr()+"/plain/demo/notes:1.0.0", "notes.sigstore.json:application/vnd.dev.sigstore.bundle.v0.3+json")
	attach.Dir = dir
	if b, err := attach.CombinedOutput(); err != nil {
		t.Fatalf("oras attach: %v\n%s", err, b)
	}
	indented := "      " + strings.ReplaceAll(strings.TrimSpace(pubPEM), "\n", "\n      ")
	w.write(".murmur/config.yaml", "stores: [\""+plain+"\"]\n")
	w.writeHome("config.yaml", "provenance: require\ntrusted_keys:\n  - hint: "+pushed.Hint+"\n    pem: |\n"+indented+"\n")
	w.write("murmur.yaml", capsuleYAML("demo/notes@1.0.0"))
	w.ok("pull", "--no-precompile")
	e := w.lock().Find("demo/notes")
	if e == nil || e.Provenance == nil || e.Provenance.Kind != "key" || e.Provenance.Signer != pushed.Hint {
		t.Fatalf("lock:\n%s", w.lockBytes())
	}
}

// TestProvenanceOrasLayoutInterop: in an oci-layout: store, `mur push --sign-key` keeps the
// bundle where `oras discover --oci-layout-path` sees it as a referrer of the artifact; and a
// bundle `oras attach --oci-layout-path` adds to an unsigned copy is found and verified by `mur
// pull` under provenance: require.
func TestProvenanceOrasLayoutInterop(t *testing.T) {
	t.Parallel()
	needOras(t)
	w := newWorld(t)
	dir := t.TempDir()
	zip := artifacttest.File(t, dir, "notes", "1.0.0", artifacttest.Module(4096, 7))
	keyFile, pubPEM := teamKey(t, dir)

	signedDir := filepath.Join(dir, "signed")
	out := w.ok("push", "--json", zip, "--scope", "demo", "--sign-key", keyFile, "--store", "oci-layout:"+signedDir)
	var pushedAll struct {
		Results []struct {
			Hint string `json:"signed_with"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(out.stdout), &pushedAll); err != nil || len(pushedAll.Results) != 1 || pushedAll.Results[0].Hint == "" {
		t.Fatalf("push --json: %v\n%s", err, out.stdout)
	}
	pushed := pushedAll.Results[0]
	disc, err := exec.Command("oras", "discover", "--oci-layout-path", signedDir, "--format", "json", "demo/notes:1.0.0").CombinedOutput()
	if err != nil || !strings.Contains(string(disc), "application/vnd.dev.sigstore.bundle.v0.3+json") {
		t.Fatalf("oras discover does not see the bundle: %v\n%s", err, disc)
	}

	st, err := ocistore.Open("oci-layout:"+signedDir, ocistore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	bundles, err := st.(store.BundleFinder).Bundles(context.Background(), ref.Name{Scope: "demo", Name: "notes"}, "1.0.0", digest.FromBytes(readFile(t, zip)))
	if err != nil || len(bundles) != 1 {
		t.Fatalf("bundles: %d, %v", len(bundles), err)
	}
	os.WriteFile(filepath.Join(dir, "notes.sigstore.json"), bundles[0], 0o644)
	plainDir := filepath.Join(dir, "plain")
	w.ok("push", zip, "--scope", "demo", "--store", "oci-layout:"+plainDir)
	attach := exec.Command("oras", "attach", "--oci-layout-path", plainDir, "--artifact-type", "application/vnd.dev.sigstore.bundle.v0.3+json",
		"demo/notes:1.0.0", "notes.sigstore.json:application/vnd.dev.sigstore.bundle.v0.3+json")
	attach.Dir = dir
	if b, err := attach.CombinedOutput(); err != nil {
		t.Fatalf("oras attach: %v\n%s", err, b)
	}
	indented := "      " + strings.ReplaceAll(strings.TrimSpace(pubPEM), "\n", "\n      ")
	w.write(".murmur/config.yaml", "stores: [\"oci-layout:"+plainDir+"\"]\n")
	w.writeHome("config.yaml", "provenance: require\ntrusted_keys:\n  - hint: "+pushed.Hint+"\n    pem: |\n"+indented+"\n")
	w.write("murmur.yaml", capsuleYAML("demo/notes@1.0.0"))
	w.ok("pull", "--no-precompile")
	e := w.lock().Find("demo/notes")
	if e == nil || e.Provenance == nil || e.Provenance.Kind != "key" || e.Provenance.Signer != pushed.Hint {
		t.Fatalf("lock:\n%s", w.lockBytes())
	}
}

// needOras skips without the oras binary, and fails under CI, where .ci/run installs it.
func needOras(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("oras"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("oras is not installed; .ci/run installs it")
		}
		t.Skip("oras is not installed (.ci/run installs it)")
	}
}

// teamKey writes a fresh P-256 signing key for push --sign-key into dir, and returns its file
// and the public key's PEM, as trusted_keys takes it.
func teamKey(t *testing.T, dir string) (keyFile, pubPEM string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(k)
	keyFile = filepath.Join(dir, "team.key")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	pubDER, _ := x509.MarshalPKIXPublicKey(k.Public())
	return keyFile, string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}))
}
