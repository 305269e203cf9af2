package ocistore_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
	"github.com/murmur-nexus/mur/internal/slowdown"
)

// faultyStore opens f's registry as a store.
func faultyStore(t *testing.T, f *registrytest.Faulty, opt ocistore.Options) store.Store {
	return open(t, "oci://"+f.Addr()+"/murmur", opt)
}

// TestFaultWrongBlobBytes documents that ocistore does not verify payloads: it streams what the
// registry sends, and the caller's hash (the CAS ingest) is what refuses it.
func TestFaultWrongBlobBytes(t *testing.T) {
	f := registrytest.StartFaulty(t)
	s := faultyStore(t, f, ocistore.Options{})
	data := payload(50_000, 70)
	d := push(t, s, grep, "1.0.0", "any", data)
	f.Arm(registrytest.BlobBody(50_000, payload(50_000, 71)))
	got := readAll(t, s, grep, d.Digest)
	if len(got) != len(data) {
		t.Fatalf("got %d bytes, want %d", len(got), len(data))
	}
	if digest.FromBytes(got) == d.Digest {
		t.Fatal("the fault did not change the bytes")
	}
}

func TestFaultShortBody(t *testing.T) {
	f := registrytest.StartFaulty(t)
	s := faultyStore(t, f, ocistore.Options{})
	data := payload(200_000, 72)
	d := push(t, s, grep, "1.0.0", "any", data)
	f.Arm(registrytest.BlobBody(200_000, data[:70_000]))
	rc, err := s.Open(context.Background(), grep, d.Digest)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	n, err := io.Copy(io.Discard, rc)
	errtest.WantToken(t, err, errs.Network, d.Digest.String())
	if n >= 200_000 {
		t.Fatalf("read %d bytes of a short body", n)
	}

	// The same through plain Read calls, without io.Copy's WriteTo.
	rc2, err := s.Open(context.Background(), grep, d.Digest)
	if err != nil {
		t.Fatal(err)
	}
	defer rc2.Close()
	_, err = io.ReadAll(struct{ io.Reader }{rc2})
	errtest.WantToken(t, err, errs.Network, "70000 of 200000")
}

type failingWriter struct{ n int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.n += len(p); w.n > 300_000 {
		return 0, errors.New("disk full")
	}
	return len(p), nil
}

// TestOpenWriterFails checks that a consumer's write error ends the read-ahead copy.
func TestOpenWriterFails(t *testing.T) {
	f := registrytest.StartFaulty(t)
	s := faultyStore(t, f, ocistore.Options{})
	d := push(t, s, grep, "1.0.0", "any", payload(3<<20, 77))
	rc, err := s.Open(context.Background(), grep, d.Digest)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.Copy(&failingWriter{}, rc)
	if err == nil || err.Error() != "disk full" {
		t.Fatalf("io.Copy = %v, want disk full", err)
	}
	if err := rc.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestFaultTransientRetried(t *testing.T) {
	for _, c := range []struct {
		code       int
		retryAfter string
	}{{500, ""}, {503, ""}, {429, "1"}} {
		t.Run(http.StatusText(c.code), func(t *testing.T) {
			t.Parallel() // each waits out its retries, on its own registry
			f := registrytest.StartFaulty(t)
			s := faultyStore(t, f, ocistore.Options{})
			data := payload(10_000, 73)
			d := push(t, s, grep, "1.0.0", "any", data)
			failed := &registrytest.FailFirst{N: 2, Status: c.code, RetryAfter: c.retryAfter}
			f.Arm(failed.Serve)
			start := time.Now()
			got, err := s.Resolve(context.Background(), grep, "1.0.0", "any")
			if err != nil {
				t.Fatalf("Resolve after transient %d: %v", c.code, err)
			}
			if got.Digest != d.Digest {
				t.Fatalf("resolved %s, want %s", got.Digest, d.Digest)
			}
			if b := readAll(t, s, grep, d.Digest); !bytes.Equal(b, data) {
				t.Fatal("Open after transient failures returned other bytes")
			}
			if n := failed.Served(); n != 4 {
				t.Fatalf("%d failures served, want 2 for the manifest and 2 for the blob", n)
			}
			// Retry-After: 1 is honoured: four waits of a second each.
			if c.retryAfter != "" && time.Since(start) < 3500*time.Millisecond {
				t.Fatalf("retries after 429 took %s; Retry-After asked for 1s each", time.Since(start))
			}
		})
	}
}

func TestFaultAlways5xx(t *testing.T) {
	f := registrytest.StartFaulty(t)
	s := faultyStore(t, f, ocistore.Options{Retries: 2})
	d := push(t, s, grep, "1.0.0", "any", payload(100, 74))
	attempts := registrytest.Always(http.StatusBadGateway)
	f.Arm(attempts.Serve)
	_, err := s.Resolve(context.Background(), grep, "1.0.0", "any")
	errtest.WantToken(t, err, errs.Network, f.Addr(), "502")
	if n := attempts.Served(); n != 3 {
		t.Fatalf("%d attempts, want 1 + 2 retries", n)
	}
	_, err = s.Open(context.Background(), grep, d.Digest)
	errtest.WantToken(t, err, errs.Network, f.Addr(), "502")
}

func TestFaultStall(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	f := registrytest.StartFaulty(t)
	s := faultyStore(t, f, ocistore.Options{Timeout: slowdown.Scale(300 * time.Millisecond), Retries: 1})
	data := payload(100_000, 75)
	d := push(t, s, grep, "1.0.0", "any", data)

	// Blobs get headers and a first chunk, then nothing; manifests get nothing at all.
	f.Arm(registrytest.StallBlob(100_000, data[:1000], release, registrytest.Hang(release)))
	start := time.Now()
	_, err := s.Resolve(context.Background(), grep, "1.0.0", "any")
	errtest.WantToken(t, err, errs.Network, f.Addr())
	if el := time.Since(start); el > slowdown.Scale(15*time.Second) {
		t.Fatalf("a stalled manifest request took %s", el)
	}

	start = time.Now()
	rc, err := s.Open(context.Background(), grep, d.Digest)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	n, err := io.Copy(io.Discard, rc)
	errtest.WantToken(t, err, errs.Network, "stalled")
	if n != 1000 {
		t.Fatalf("read %d bytes before the stall, want 1000", n)
	}
	if el := time.Since(start); el > slowdown.Scale(15*time.Second) {
		t.Fatalf("a stalled body took %s to fail", el)
	}
}

func TestFaultBadManifests(t *testing.T) {
	f := registrytest.StartFaulty(t)
	s := faultyStore(t, f, ocistore.Options{})
	d := push(t, s, grep, "1.0.0", "any", payload(100, 76))
	layer := `{"mediaType":"` + "application/vnd.murmur.artifact.v1+zip" + `","digest":"` + d.Digest.String() + `","size":100}`
	config := `{"mediaType":"application/vnd.oci.empty.v1+json","digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","size":2}`
	annotations := `"annotations":{"dev.murmur.artifact.name":"acme/grep","dev.murmur.artifact.version":"%s","dev.murmur.artifact.platform":"any"}`
	manifest := func(version, layers string) string {
		return `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","artifactType":"application/vnd.murmur.artifact.v1","config":` + config +
			`,"layers":[` + layers + `],` + strings.Replace(annotations, "%s", version, 1) + `}`
	}
	cases := []struct {
		version, raw string
		mt           types.MediaType
		mentions     []string
	}{
		{"2.0.0", manifest("2.0.0", layer+","+layer), types.OCIManifestSchema1, []string{"2 layers, expected exactly 1"}},
		{"3.0.0", manifest("3.0.0", strings.Replace(layer, "application/vnd.murmur.artifact.v1+zip", "application/x-tar", 1)), types.OCIManifestSchema1, []string{"application/x-tar", "application/vnd.murmur.artifact.v1+zip"}},
		{"4.0.0", manifest("4.0.0", layer), types.DockerManifestSchema2, []string{string(types.DockerManifestSchema2)}},
		{"5.0.0", strings.Replace(manifest("5.0.0", layer), `"artifactType":"application/vnd.murmur.artifact.v1",`, "", 1), types.OCIManifestSchema1, []string{"artifactType"}},
		{"6.0.0", manifest("6.0.0", ""), types.OCIManifestSchema1, []string{"0 layers"}},
	}
	for _, c := range cases {
		f.PutManifest(t, "murmur/acme/grep", c.version, []byte(c.raw), string(c.mt))
		_, err := s.Resolve(context.Background(), grep, c.version, "any")
		errtest.WantToken(t, err, errs.Integrity, append(c.mentions, "acme/grep:"+c.version, f.Addr())...)
	}
}
