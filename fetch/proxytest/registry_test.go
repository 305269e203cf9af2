package proxytest_test

import (
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/fetch/proxytest"
)

// In front of the real docker-registry: a push works through the proxy (the registry's upload
// locations, built from the Host header, lead back through it), ranges pass or are hidden, and
// the bytes served are counted by blob.
func TestInFrontOfDockerRegistry(t *testing.T) {
	reg := registrytest.Start(t)
	p := proxytest.Start(t, reg.Addr(), proxytest.Options{})
	img, err := random.Image(1<<20, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(p.Addr()+"/murmur/acme/big:1.0.0", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatalf("push through the proxy: %v", err)
	}
	layers, _ := img.Layers()
	dg, _ := layers[0].Digest()
	size, _ := layers[0].Size()
	blobPath := "/v2/murmur/acme/big/blobs/" + dg.String()

	ranged := func() (*http.Response, int64) {
		req, _ := http.NewRequest(http.MethodGet, p.URL()+blobPath, nil)
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", size-10))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		n, _ := io.Copy(io.Discard, resp.Body)
		return resp, n
	}
	before := p.BytesServed(blobPath)
	if resp, n := ranged(); resp.StatusCode != http.StatusPartialContent || n != 10 {
		t.Fatalf("ranged GET: %d, %d bytes", resp.StatusCode, n)
	}
	p.Set(proxytest.Options{IgnoreRange: true})
	if resp, n := ranged(); resp.StatusCode != http.StatusOK || n != size {
		t.Fatalf("ranged GET with IgnoreRange: %d, %d bytes", resp.StatusCode, n)
	}
	if got := p.BytesServed(blobPath) - before; got != 10+size {
		t.Fatalf("BytesServed(blob) grew by %d, want %d", got, 10+size)
	}
}
