package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
)

// -q silences progress, never an integrity failure: a pull that fell through a store serving
// wrong bytes says so on stderr, per store and in one closing line, and still succeeds.
func TestQuietNeverHidesAnIntegrityFailure(t *testing.T) {
	t.Parallel()
	f := artifacttest.File(t, t.TempDir(), "one", "1.0.0", artifacttest.Module(32<<10, 611))
	blob, d := readFile(t, f), fileDigest(t, f)
	wrong := registrytest.StartFaulty(t)
	good := registrytest.StartFaulty(t)
	w := newWorld(t)
	for _, r := range []*registrytest.Faulty{wrong, good} {
		w.ok("push", f, "--scope", "e2e", "--store", "oci://"+r.Addr()+"/murmur")
	}
	wrong.Arm(func(rw http.ResponseWriter, r *http.Request, next http.Handler) {
		if registrytest.IsBlob(r) && strings.HasSuffix(r.URL.Path, d) {
			bad := bytes.Clone(blob)
			bad[len(bad)/2] ^= 0xff
			rw.Write(bad)
			return
		}
		next.ServeHTTP(rw, r)
	})
	bad := "oci://" + wrong.Addr() + "/murmur"
	w.write(".murmur/config.yaml", fmt.Sprintf("stores:\n  - {url: %q, fallback: any-error}\n  - %q\n", bad, "oci://"+good.Addr()+"/murmur"))
	w.write("murmur.yaml", capsuleYAML("e2e/one@1.0.0"))
	r := w.ok("-q", "pull", "--no-precompile")
	for _, want := range []string{
		"mur: warning: e2e/one: skipped " + bad + ": integrity:",
		"mur: warning: 1 artifact was pulled only after " + bad + " served bytes that failed the integrity check (e2e/one)",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Fatalf("mur -q pull does not say %q:\n%s", want, r)
		}
	}
}
