package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/ref"
)

// TestProvenanceBundlesAreContent: the bundle murmur.lock records is a blob like the artifact's.
// `mur warm --layout` copies it into the layout; `mur cache export` carries it, and after `cache import` into a fresh home, with GitHub gone and
// the network off, a locked pull and `mur verify` (which re-verifies the bundle from the CAS)
// pass; `cache gc` keeps it as a pinned blob, and verify still passes after gc.
func TestProvenanceBundlesAreContent(t *testing.T) {
	t.Parallel()
	w, gh, ca, d, _ := attestedWorld(t)
	w.ok("pull", "--no-precompile")
	recorded := w.lock().Find("acme/hello").Provenance
	if recorded == nil {
		t.Fatalf("lock:\n%s", w.lockBytes())
	}

	// warm --layout copies the bundle beside the artifact, where a pull from that store finds it.
	layoutDir := filepath.Join(t.TempDir(), "ci-store")
	w.ok("warm", "--layout", layoutDir)
	st, err := ocistore.Open("oci-layout:"+layoutDir, ocistore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	found, err := st.(store.BundleFinder).Bundles(context.Background(), ref.Name{Scope: "acme", Name: "hello"}, "1.0.0", d)
	if err != nil || len(found) != 1 || digest.FromBytes(found[0]).String() != recorded.Bundle {
		t.Fatalf("warm --layout kept %d bundles (%v); want the recorded one", len(found), err)
	}

	bundleFile := filepath.Join(t.TempDir(), "ci.tar.zst")
	out := w.ok("cache", "export", "--json", "--lock", "murmur.lock", "-o", bundleFile)
	if !strings.Contains(out.stdout, `"blobs": 2`) {
		t.Fatalf("export should carry the artifact and its bundle: %s", out.stdout)
	}
	gh.Close()

	w.home = filepath.Join(t.TempDir(), "fresh-home")
	w.env = append(w.env, "MURMUR_HOME="+w.home, "MUR_OFFLINE=1")
	// The fresh home trusts what the first did: trust is the home's, not the project's.
	w.writeHome("roots.json", string(ca.TrustedRootJSON(t)))
	w.writeHome("config.yaml", "trusted_root: roots.json\nscopes:\n  acme:\n    provenance: require\n")
	if err := os.RemoveAll(filepath.Join(w.project, "tools")); err != nil {
		t.Fatal(err)
	}
	w.ok("cache", "import", bundleFile)
	w.ok("pull", "--locked", "--no-precompile")
	verify := func() {
		t.Helper()
		var rep struct {
			Provenance []struct {
				Bundle string `json:"bundle"`
				Signer string `json:"signer"`
			} `json:"provenance"`
		}
		out := w.ok("verify", "--json")
		if err := json.Unmarshal([]byte(out.stdout), &rep); err != nil || len(rep.Provenance) != 1 || rep.Provenance[0].Bundle != recorded.Bundle || rep.Provenance[0].Signer != recorded.Signer {
			t.Fatalf("verify --json in the fresh home: %v\n%s", err, out.stdout)
		}
	}
	verify()

	w.ok("cache", "gc", "--older-than", "0s")
	if _, err := os.Stat(filepath.Join(w.home, "cas", "blobs", "sha256", strings.TrimPrefix(recorded.Bundle, "sha256:"))); err != nil {
		t.Fatalf("gc removed the recorded bundle: %v", err)
	}
	verify()
}
