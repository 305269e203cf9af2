package publish_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/fetch/publish"
	fstore "github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
)

// A bundle's referrer manifest is a function of the artifact and the bundle, so pushing an
// artifact again asks the registry with a HEAD whether it holds the bundle and, when it does,
// writes nothing: a second push puts no referrer manifest.
func TestPushAttachesABundleOnce(t *testing.T) {
	var referrerPuts atomic.Int64
	reg := registrytest.StartInProcess(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/manifests/sha256:") {
				referrerPuts.Add(1)
			}
			next.ServeHTTP(w, r)
		})
	})
	dst, err := ocistore.Open("oci://"+reg.Addr()+"/murmur", ocistore.Options{PlainHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	file := artifacttest.File(t, t.TempDir(), "grep", "1.2.0", artifacttest.Tagged("bundled"))
	it, err := publish.FromFile(file, "acme", "any")
	if err != nil {
		t.Fatal(err)
	}
	it.Bundles = [][]byte{[]byte(`{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json"}`)}
	for i, want := range []int64{1, 0} {
		referrerPuts.Store(0)
		if err := publish.Push(context.Background(), dst, it); err != nil {
			t.Fatalf("push %d: %v", i+1, err)
		}
		if got := referrerPuts.Load(); got != want {
			t.Errorf("push %d put %d referrer manifests, want %d", i+1, got, want)
		}
	}
	bundles, err := dst.(fstore.BundleFinder).Bundles(context.Background(), it.Desc.Name, "1.2.0", it.Desc.Digest)
	if err != nil || len(bundles) != 1 || string(bundles[0]) != string(it.Bundles[0]) {
		t.Fatalf("the registry holds %d bundles of the artifact (%v), want the one pushed", len(bundles), err)
	}
}
