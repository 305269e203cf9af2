package ocistore_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
)

// In a layout, a bundle is an untagged index.json entry whose manifest names the artifact's
// manifest as its subject, listed again by the repo:sha256-<hex> index; attaching it twice adds
// nothing, latest never takes the referrer tag for a version, and a bundle layer damaged on disk
// fails with integrity instead of passing as a different bundle.
func TestLayoutReferrers(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, "oci-layout:"+dir, ocistore.Options{})
	data := payload(3000, 41)
	desc := push(t, s, grep, "1.2.0", "any", data)
	bundle := []byte(`{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json","messageSignature":{}}`)
	other := []byte(`{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json","messageSignature":{"x":1}}`)
	at := s.(store.BundleAttacher)
	for _, b := range [][]byte{bundle, bundle, other} {
		if err := at.AttachBundle(ctx, grep, "1.2.0", desc.Digest, b); err != nil {
			t.Fatal(err)
		}
	}

	var idx v1.IndexManifest
	readJSON(t, filepath.Join(dir, "index.json"), &idx)
	var subject v1.Hash
	referrers, fallbacks := 0, 0
	for _, e := range idx.Manifests {
		switch name := e.Annotations[ocistore.AnnotationRefName]; {
		case name == "acme/grep:1.2.0":
			subject = e.Digest
		case strings.HasPrefix(name, "acme/grep:sha256-"):
			fallbacks++
		case name == "" && e.ArtifactType == provenance.BundleMediaType:
			referrers++
			var m v1.Manifest
			readJSON(t, filepath.Join(dir, "blobs", "sha256", e.Digest.Hex), &m)
			if m.Subject == nil || m.Subject.Digest != subject || m.ArtifactType != provenance.BundleMediaType {
				t.Fatalf("referrer manifest %+v; want subject %s", m, subject)
			}
		}
	}
	if referrers != 2 || fallbacks != 1 {
		t.Fatalf("index.json holds %d referrers and %d fallback tags; want 2 and 1:\n%+v", referrers, fallbacks, idx.Manifests)
	}
	for _, e := range idx.Manifests {
		if e.Annotations[ocistore.AnnotationRefName] == "acme/grep:sha256-"+subject.Hex {
			var im v1.IndexManifest
			readJSON(t, filepath.Join(dir, "blobs", "sha256", e.Digest.Hex), &im)
			if len(im.Manifests) != 2 {
				t.Fatalf("the fallback index lists %d referrers; want 2", len(im.Manifests))
			}
		}
	}

	got, err := s.(store.BundleFinder).Bundles(ctx, grep, "1.2.0", desc.Digest)
	if err != nil || len(got) != 2 || string(got[0]) != string(bundle) || string(got[1]) != string(other) {
		t.Fatalf("Bundles = %q, %v", got, err)
	}
	if d, err := s.Resolve(ctx, grep, "latest", "any"); err != nil || d.Version != "1.2.0" {
		t.Fatalf("latest = %+v, %v", d, err)
	}
	// Another artifact's manifest has no bundles, though its neighbour has.
	d2 := push(t, s, grep, "1.3.0", "any", payload(100, 42))
	if got, err := s.(store.BundleFinder).Bundles(ctx, grep, "1.3.0", d2.Digest); err != nil || len(got) != 0 {
		t.Fatalf("Bundles of 1.3.0 = %q, %v", got, err)
	}

	bundlePath := filepath.Join(dir, "blobs", "sha256", digest.FromBytes(bundle).Encoded())
	if err := os.WriteFile(bundlePath, []byte(strings.Replace(string(bundle), "{}", "{ }", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.(store.BundleFinder).Bundles(ctx, grep, "1.2.0", desc.Digest); !errors.Is(err, errs.Integrity) {
		t.Fatalf("a damaged bundle: %v", err)
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
