package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
)

// A cloned project whose tools/, tools/<scope> or .murmur/ is a symlink is refused before a
// single request is made: nothing is downloaded, pinned or written through the link.
func TestLinkedProjectFoldersAreRefusedBeforeAnyDownload(t *testing.T) {
	t.Parallel()
	f := artifacttest.File(t, t.TempDir(), "one", "1.0.0", artifacttest.Module(16<<10, 621))
	for _, linked := range []string{"tools", "tools/e2e", ".murmur"} {
		t.Run(strings.ReplaceAll(linked, "/", "-"), func(t *testing.T) {
			reg := registrytest.StartFaulty(t)
			w := newWorld(t)
			w.ok("push", f, "--scope", "e2e", "--store", "oci://"+reg.Addr()+"/murmur")
			w.stores("oci://" + reg.Addr() + "/murmur")
			w.write("murmur.yaml", capsuleYAML("e2e/one@1.0.0"))
			target := t.TempDir()
			p := filepath.Join(w.project, linked)
			if linked == ".murmur" {
				// The link leads to a real config naming the same store: only the link is wrong.
				must(t, os.Rename(p, filepath.Join(target, "m")))
				target = filepath.Join(target, "m")
			}
			must(t, os.MkdirAll(filepath.Dir(p), 0o755))
			must(t, os.Symlink(target, p))
			before := reg.Requests()
			r := w.fails("denied", "pull")
			if !strings.Contains(r.stderr, "symlink") {
				t.Fatalf("the refusal does not name the symlink: %s", r)
			}
			if n := reg.Requests() - before; n != 0 {
				t.Fatalf("%d requests reached the registry before the refusal", n)
			}
			if w.blobCount() != 0 || w.lockBytes() != "" {
				t.Fatalf("the refused pull left %d blobs and a lock of %d bytes", w.blobCount(), len(w.lockBytes()))
			}
			if ents, _ := os.ReadDir(target); linked != ".murmur" && len(ents) != 0 {
				t.Fatalf("something was written through the link: %v", ents)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
