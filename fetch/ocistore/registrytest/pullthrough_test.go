package registrytest

import (
	"net/http"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/opencontainers/go-digest"
)

// The cache serves what its upstream holds, stores it (WaitStored sees it), serves it with the
// upstream stopped, and refuses writes with 405.
func TestStartPullThrough(t *testing.T) {
	up := Start(t)
	cache := StartPullThrough(t, up.URL())
	img, err := random.Image(1024, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := name.NewTag(up.Addr()+"/acme/grep:1.0.0", name.Insecure)
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	layers, _ := img.Layers()
	d, _ := layers[0].Digest()
	blob := "/v2/acme/grep/blobs/" + d.String()
	if code, err := get(t, cache.URL()+blob); err != nil || code != http.StatusOK {
		t.Fatalf("GET %s through the cache: %d, %v", blob, code, err)
	}
	cache.WaitStored(t, digest.Digest(d.String()))
	up.Stop()
	if code, err := get(t, cache.URL()+blob); err != nil || code != http.StatusOK {
		t.Fatalf("GET %s with the upstream stopped: %d, %v", blob, code, err)
	}
	resp, err := http.Post(cache.URL()+"/v2/acme/grep/blobs/uploads/", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("a write to the cache: HTTP %d, want 405", resp.StatusCode)
	}
}
