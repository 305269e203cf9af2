package registrytest

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/internal/slowdown"
)

// zeros is a well-formed digest of a blob no test pushes.
var zeros = strings.Repeat("0", 64)

func fetch(t *testing.T, url string) (*http.Response, []byte, error) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

func TestFaultyFailFirst(t *testing.T) {
	f := StartFaulty(t)
	manifest := f.URL() + "/v2/acme/grep/manifests/1.0.0"
	blob := f.URL() + "/v2/acme/grep/blobs/sha256:" + zeros
	// Unarmed, the registry answers as itself: an unknown manifest is 404.
	if resp, _, err := fetch(t, manifest); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unarmed GET: %v, %v", resp, err)
	}
	ff := &FailFirst{N: 2, Status: http.StatusTooManyRequests, RetryAfter: "7"}
	f.Arm(ff.Serve)
	for i, c := range []struct {
		url  string
		want int
	}{{manifest, 429}, {blob, 429}, {manifest, 429}, {"/v2/", 200}, {manifest, 404}, {blob, 429}, {blob, 404}} {
		url := c.url
		if url == "/v2/" {
			url = f.URL() + url
		}
		resp, _, err := fetch(t, url)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != c.want {
			t.Fatalf("request %d to %s: HTTP %d, want %d", i, c.url, resp.StatusCode, c.want)
		}
		if c.want == 429 && resp.Header.Get("Retry-After") != "7" {
			t.Errorf("request %d: Retry-After %q", i, resp.Header.Get("Retry-After"))
		}
	}
	if n := ff.Served(); n != 4 {
		t.Errorf("Served() = %d, want 4", n)
	}
	if n := f.Requests(); n != 8 {
		t.Errorf("Requests() = %d, want 8", n)
	}
	f.Arm(nil)
	if resp, _, _ := fetch(t, blob); resp.StatusCode != http.StatusNotFound {
		t.Errorf("disarmed: HTTP %d", resp.StatusCode)
	}

	always := Always(http.StatusBadGateway)
	f.Arm(always.Serve)
	for range 3 {
		if resp, _, _ := fetch(t, manifest); resp.StatusCode != http.StatusBadGateway {
			t.Fatalf("Always: HTTP %d", resp.StatusCode)
		}
	}
	if always.Served() != 3 {
		t.Errorf("Always served %d, want 3", always.Served())
	}
}

func TestFaultyBlobBody(t *testing.T) {
	f := StartFaulty(t)
	f.Arm(BlobBody(10, []byte("0123456789")))
	resp, b, err := fetch(t, f.URL()+"/v2/acme/grep/blobs/sha256:"+zeros)
	if err != nil || resp.StatusCode != 200 || string(b) != "0123456789" {
		t.Fatalf("blob: %v %q %v", resp, b, err)
	}
	if resp, _, _ := fetch(t, f.URL()+"/v2/acme/grep/manifests/1.0.0"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a manifest GET was not let through: HTTP %d", resp.StatusCode)
	}
	// A body shorter than its Content-Length is a read error for the client.
	f.Arm(BlobBody(10, []byte("0123")))
	if _, b, err := fetch(t, f.URL()+"/v2/acme/grep/blobs/sha256:"+zeros); err == nil {
		t.Fatalf("a short body read without error: %q", b)
	}
}

func TestFaultyStall(t *testing.T) {
	release := make(chan struct{})
	f := StartFaulty(t)
	f.Arm(StallBlob(100, []byte("first"), release, Hang(release)))
	client := &http.Client{Timeout: slowdown.Scale(200 * time.Millisecond)}

	resp, err := client.Get(f.URL() + "/v2/acme/grep/blobs/sha256:" + zeros)
	if err != nil {
		t.Fatal(err)
	}
	head := make([]byte, 5)
	if _, err := io.ReadFull(resp.Body, head); err != nil || string(head) != "first" {
		t.Fatalf("first bytes %q, %v", head, err)
	}
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Fatal("a stalled body ended without error")
	}
	resp.Body.Close()
	if _, err := client.Get(f.URL() + "/v2/acme/grep/manifests/1.0.0"); err == nil {
		t.Fatal("Hang answered a manifest GET")
	}

	// Closing release ends a stall at once, with the body still short.
	ctx, cancel := context.WithTimeout(context.Background(), slowdown.Scale(30*time.Second))
	defer cancel()
	r, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.URL()+"/v2/acme/grep/blobs/sha256:"+zeros, nil)
	resp, err = http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	close(release)
	b, err := io.ReadAll(resp.Body)
	if err == nil || !bytes.Equal(b, []byte("first")) || ctx.Err() != nil {
		t.Fatalf("after release: %q, %v (ctx %v)", b, err, ctx.Err())
	}

	// With no handler for others, manifests go through.
	f.Arm(StallBlob(100, nil, release, nil))
	if resp, _, _ := fetch(t, f.URL()+"/v2/acme/grep/manifests/1.0.0"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("StallBlob with nil others: HTTP %d", resp.StatusCode)
	}
}

func TestPutManifest(t *testing.T) {
	r := StartInProcess(t, nil)
	raw := []byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","layers":[]}`)
	r.PutManifest(t, "murmur/acme/grep", "1.0.0", raw, "application/vnd.oci.image.manifest.v1+json")
	req, _ := http.NewRequest(http.MethodGet, r.URL()+"/v2/murmur/acme/grep/manifests/1.0.0", nil)
	req.Header.Set("Accept", "application/vnd.oci.image.manifest.v1+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !bytes.Equal(b, raw) || resp.Header.Get("Content-Type") != "application/vnd.oci.image.manifest.v1+json" {
		t.Fatalf("GET the put manifest: HTTP %d, %s, %q", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
}
