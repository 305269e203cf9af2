package ocistore_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
	"github.com/murmur-nexus/mur/internal/ref"
)

var sed = ref.Name{Scope: "acme", Name: "sed"}

// orasManifest is what `oras push --artifact-type application/vnd.murmur.artifact.v1
// FILE:application/vnd.murmur.artifact.v1+zip` writes: mur's types, the empty config, a title,
// oras's own timestamp, and annotations only when the user adds them with -a.
func orasManifest(payload []byte, ann map[string]string) []byte {
	m := map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"artifactType":  "application/vnd.murmur.artifact.v1",
		"config": map[string]any{
			"mediaType": "application/vnd.oci.empty.v1+json",
			"digest":    digest.FromString("{}").String(),
			"size":      2,
			"data":      "e30=",
		},
		"layers": []any{map[string]any{
			"mediaType":   "application/vnd.murmur.artifact.v1+zip",
			"digest":      digest.FromBytes(payload).String(),
			"size":        len(payload),
			"annotations": map[string]string{"org.opencontainers.image.title": "grep-1.2.0.mur.zip"},
		}},
	}
	a := map[string]string{"org.opencontainers.image.created": "2026-01-02T03:04:05Z"}
	for k, v := range ann {
		a[k] = v
	}
	m["annotations"] = a
	raw, _ := json.Marshal(m)
	return raw
}

func TestForeignManifestNamedByPathAndTag(t *testing.T) {
	r := registrytest.StartInProcess(t, nil)
	s := open(t, "oci://"+r.Addr()+"/murmur", ocistore.Options{})
	data := payload(500, 70)
	r.PutManifest(t, "murmur/acme/grep", "1.2.0", orasManifest(data, nil), "application/vnd.oci.image.manifest.v1+json")

	got, err := s.Resolve(context.Background(), grep, "1.2.0", "linux-x86_64")
	if err != nil {
		t.Fatalf("a manifest without mur's annotations: %v", err)
	}
	if got.Name != grep || got.Version != "1.2.0" || got.Platform != "any" || got.Digest != digest.FromBytes(data) {
		t.Fatalf("Resolve = %+v; want acme/grep@1.2.0, platform any, the layer's digest", got)
	}
	// latest reads the version from the tag too.
	if got, err := s.Resolve(context.Background(), grep, "latest", "any"); err != nil || got.Version != "1.2.0" {
		t.Fatalf("latest = %+v, %v", got, err)
	}
	// A '_' in a tag is '+' or itself; the version asked says which.
	r.PutManifest(t, "murmur/acme/grep", "1.3.0_b1", orasManifest(data, nil), "application/vnd.oci.image.manifest.v1+json")
	if got, err := s.Resolve(context.Background(), grep, "1.3.0+b1", "any"); err != nil || got.Version != "1.3.0+b1" {
		t.Fatalf("1.3.0+b1 = %+v, %v", got, err)
	}
	// An annotation that is present still has to agree with the path.
	r.PutManifest(t, "murmur/acme/grep", "2.0.0", orasManifest(data, map[string]string{"dev.murmur.artifact.name": "acme/other"}), "application/vnd.oci.image.manifest.v1+json")
	_, err = s.Resolve(context.Background(), grep, "2.0.0", "any")
	errtest.WantToken(t, err, errs.Integrity, `"acme/other"`)
}

func TestForeignIndexPlatformField(t *testing.T) {
	r := registrytest.StartInProcess(t, nil)
	s := open(t, "oci://"+r.Addr()+"/murmur", ocistore.Options{})
	amd, arm := payload(300, 71), payload(300, 72)
	var children []any
	for _, c := range []struct {
		data []byte
		arch string
	}{{amd, "amd64"}, {arm, "arm64"}} {
		raw := orasManifest(c.data, nil)
		d := digest.FromBytes(raw)
		ref, _ := name.NewDigest(r.Addr()+"/murmur/acme/grep@"+d.String(), name.Insecure)
		if err := remote.Put(ref, rawManifest(raw)); err != nil {
			t.Fatal(err)
		}
		children = append(children, map[string]any{
			"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": d.String(), "size": len(raw),
			"platform": map[string]string{"os": "linux", "architecture": c.arch},
		})
	}
	idx, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": children})
	r.PutManifest(t, "murmur/acme/grep", "1.2.0", idx, "application/vnd.oci.image.index.v1+json")

	got, err := s.Resolve(context.Background(), grep, "1.2.0", "linux-aarch64")
	if err != nil || got.Platform != "linux-aarch64" || got.Digest != digest.FromBytes(arm) {
		t.Fatalf("linux-aarch64 = %+v, %v", got, err)
	}
	// An OCI platform mur has no tag for is refused, naming it.
	winRaw := orasManifest(amd, nil)
	win, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": []any{map[string]any{
		"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": digest.FromBytes(winRaw).String(), "size": len(winRaw),
		"platform": map[string]string{"os": "windows", "architecture": "amd64"}}}})
	r.PutManifest(t, "murmur/acme/grep", "9.0.0", win, "application/vnd.oci.image.index.v1+json")
	_, err = s.Resolve(context.Background(), grep, "9.0.0", "any")
	errtest.WantToken(t, err, errs.Integrity, "OCI platform windows/amd64, which mur has no platform tag for")
	// Neither child is for darwin, and none is "any": the message names what is there.
	_, err = s.Resolve(context.Background(), grep, "1.2.0", "darwin-aarch64")
	errtest.WantToken(t, err, errs.NotFound, "platforms linux-x86_64, linux-aarch64 but not for darwin-aarch64")
}

type rawManifest []byte

func (m rawManifest) RawManifest() ([]byte, error) { return m, nil }
func (m rawManifest) MediaType() (types.MediaType, error) {
	return "application/vnd.oci.image.manifest.v1+json", nil
}

// orasLayout writes what `oras push --oci-layout DIR:TAG` writes: the blobs, and an index.json
// entry whose ref name is the bare tag.
func orasLayout(t *testing.T, dir, refName string, data []byte, ann map[string]string) {
	t.Helper()
	raw := orasManifest(data, ann)
	for _, b := range [][]byte{raw, []byte("{}"), data} {
		p := filepath.Join(dir, "blobs", "sha256", digest.FromBytes(b).Encoded())
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var idx struct {
		SchemaVersion int              `json:"schemaVersion"`
		MediaType     string           `json:"mediaType"`
		Manifests     []map[string]any `json:"manifests"`
	}
	if b, err := os.ReadFile(filepath.Join(dir, "index.json")); err == nil {
		json.Unmarshal(b, &idx)
	}
	idx.SchemaVersion, idx.MediaType = 2, "application/vnd.oci.image.index.v1+json"
	idx.Manifests = append(idx.Manifests, map[string]any{
		"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": digest.FromBytes(raw).String(), "size": len(raw),
		"annotations": map[string]string{"org.opencontainers.image.ref.name": refName},
	})
	b, _ := json.Marshal(idx)
	os.WriteFile(filepath.Join(dir, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644)
	if err := os.WriteFile(filepath.Join(dir, "index.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLayoutRefConventions(t *testing.T) {
	dir := t.TempDir()
	s := open(t, "oci-layout:"+dir, ocistore.Options{})
	named, anonymous, scoped := payload(200, 80), payload(200, 81), payload(200, 82)
	// A bare tag whose manifest names the artifact, as oras push --oci-layout DIR:1.2.0 -a ... writes it.
	orasLayout(t, dir, "2.0.0", named, map[string]string{"dev.murmur.artifact.name": "acme/grep"})
	// A bare tag whose manifest says nothing: it could be anything, so it answers for nothing.
	orasLayout(t, dir, "1.3.0", anonymous, nil)
	// mur's own convention, as oras --oci-layout-path DIR acme/grep:1.4.0 writes it.
	orasLayout(t, dir, "acme/grep:1.4.0", scoped, nil)

	if got, err := s.Resolve(context.Background(), grep, "2.0.0", "any"); err != nil || got.Digest != digest.FromBytes(named) {
		t.Fatalf("bare tag named by its manifest: %+v, %v", got, err)
	}
	if got, err := s.Resolve(context.Background(), grep, "1.4.0", "any"); err != nil || got.Digest != digest.FromBytes(scoped) || got.Version != "1.4.0" {
		t.Fatalf("scope/name:version: %+v, %v", got, err)
	}
	// The bare tag counts among the versions latest picks from.
	if got, err := s.Resolve(context.Background(), grep, "latest", "any"); err != nil || got.Version != "2.0.0" {
		t.Fatalf("latest: %+v, %v", got, err)
	}
	orasLayout(t, dir, "", payload(200, 83), nil) // what crane pull --format oci writes: no ref name
	_, err := s.Resolve(context.Background(), grep, "1.3.0", "any")
	// The artifact is there in other versions: those, not the layout's every ref.
	errtest.WantToken(t, err, errs.NotFound, "has no acme/grep@1.3.0; it holds, newest first: 2.0.0, 1.4.0;")
	if strings.Contains(errs.Message(err), "the refs") {
		t.Fatalf("a miss of an artifact the layout holds lists every ref: %v", err)
	}
	// Another artifact's bare tag is not this one's; of an artifact it does not hold, the refs
	// it does hold are the clue.
	_, err = s.Resolve(context.Background(), sed, "2.0.0", "any")
	errtest.WantToken(t, err, errs.NotFound, "the refs 1.3.0, 2.0.0, acme/grep:1.4.0 (and 1 entry without org.opencontainers.image.ref.name")
}

func TestPlatformLayerTitles(t *testing.T) {
	dir := t.TempDir()
	s := open(t, "oci-layout:"+dir, ocistore.Options{})
	push(t, s, grep, "1.2.0", "linux-x86_64", payload(100, 90))
	push(t, s, grep, "1.2.0", "linux-aarch64", payload(100, 91))
	push(t, s, grep, "1.3.0", "any", payload(100, 92))
	titles := map[string]bool{}
	filepath.Walk(filepath.Join(dir, "blobs"), func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() || fi.Size() > 4096 {
			return err
		}
		b, _ := os.ReadFile(p)
		var m struct {
			Layers []struct{ Annotations map[string]string }
		}
		if json.Unmarshal(b, &m) == nil {
			for _, l := range m.Layers {
				titles[l.Annotations["org.opencontainers.image.title"]] = true
			}
		}
		return nil
	})
	for _, want := range []string{"grep-1.2.0-linux-x86_64.mur.zip", "grep-1.2.0-linux-aarch64.mur.zip", "grep-1.3.0.mur.zip"} {
		if !titles[want] {
			t.Errorf("no layer titled %s; titles %v", want, titles)
		}
	}
}
