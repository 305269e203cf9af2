package ocistore

import (
	"context"
	"encoding/json"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/lockedfile"
	"github.com/murmur-nexus/mur/internal/ref"
)

// A layout keeps an artifact's bundles the way a registry does, so that the tools that read
// layouts see them: each referrer manifest is an entry of index.json (oras-go builds its
// referrers graph from those entries and the subject each one names, which is what `oras
// discover --oci-layout` lists, and where `oras attach --oci-layout` puts its own), and the
// entry repo:sha256-<hex> names an index of them, the fallback tag registries without the
// referrers API hold.

var (
	_ store.BundleFinder   = (*layoutStore)(nil)
	_ store.BundleAttacher = (*layoutStore)(nil)
)

func fallbackTag(d v1.Hash) string { return "sha256-" + d.Hex }

// Bundles implements fetch.BundleFinder: the bundles referring to the manifest of d, from the
// fallback index and from index.json's own entries.
func (s *layoutStore) Bundles(ctx context.Context, n ref.Name, version string, d digest.Digest) ([][]byte, error) {
	repo := n.String()
	sub, err := subjectIn(ctx, s, repo, n, version, d)
	if err != nil {
		return nil, err
	}
	idx, _, err := s.readIndex()
	if err != nil {
		return nil, err
	}
	where := s.where(repo, fallbackTag(sub.Digest))
	var cands []v1.Descriptor
	if e, ok := idx.find(repo + ":" + fallbackTag(sub.Digest)); ok && e.MediaType == types.OCIImageIndex {
		raw, err := s.readBlob(where, e.Digest, e.Size)
		if err != nil {
			return nil, err
		}
		var im v1.IndexManifest
		if err := json.Unmarshal(raw, &im); err != nil {
			return nil, errs.Wrap(err, errs.Integrity, "%s: the referrers index %s does not parse (%v); re-attach the bundles or remove the entry", where, e.Digest, err)
		}
		cands = append(cands, im.Manifests...)
	}
	for _, e := range idx.entries {
		// Referrers stand in index.json untagged; a tagged manifest is an artifact's.
		if e.MediaType == types.OCIManifestSchema1 && e.Annotations[AnnotationRefName] == "" &&
			(e.ArtifactType == "" || e.ArtifactType == provenance.BundleMediaType) {
			if h, err := v1.NewHash(e.Digest); err == nil {
				cands = append(cands, v1.Descriptor{MediaType: e.MediaType, Digest: h, Size: e.Size, ArtifactType: e.ArtifactType})
			}
		}
	}
	seen := map[v1.Hash]bool{}
	var out [][]byte
	for _, c := range cands {
		if seen[c.Digest] || c.Size > maxBundleBytes || (c.ArtifactType != "" && c.ArtifactType != provenance.BundleMediaType) {
			continue
		}
		seen[c.Digest] = true
		raw, err := s.readBlob(where, c.Digest.String(), c.Size)
		if err != nil {
			continue // an entry that does not read is no bundle; a missing one fails require later
		}
		layer, ok := bundleLayer(raw, sub.Digest)
		if !ok {
			continue
		}
		b, err := s.readBlob(where, layer.Digest.String(), layer.Size)
		if err != nil {
			return nil, errs.Wrap(err, errs.TokenOf(err), "%s: the bundle of %s@%s: %s", s.addr, n, version, errs.Message(err))
		}
		out = append(out, b)
	}
	return out, nil
}

// bundleLayer is the bundle layer of raw when raw is a manifest in cosign's bundle layout whose
// subject is sub.
func bundleLayer(raw []byte, sub v1.Hash) (v1.Descriptor, bool) {
	var m v1.Manifest
	if json.Unmarshal(raw, &m) != nil || m.Subject == nil || m.Subject.Digest != sub || len(m.Layers) != 1 ||
		m.Layers[0].Size > maxBundleBytes || m.Layers[0].Size < 0 {
		return v1.Descriptor{}, false
	}
	if m.ArtifactType != provenance.BundleMediaType && string(m.Config.MediaType) != provenance.BundleMediaType {
		return v1.Descriptor{}, false
	}
	return m.Layers[0], true
}

// AttachBundle implements fetch.BundleAttacher: the bundle's manifest becomes an entry of
// index.json and of the repo:sha256-<hex> index. Attaching a bundle twice changes nothing.
func (s *layoutStore) AttachBundle(ctx context.Context, n ref.Name, version string, d digest.Digest, bundle []byte) error {
	repo := n.String()
	sub, err := subjectIn(ctx, s, repo, n, version, d)
	if err != nil {
		return err
	}
	raw, err := bundleManifest(sub, bundle)
	if err != nil {
		return err
	}
	what := "the bundle of " + n.String() + "@" + version
	for _, b := range [][]byte{emptyConfig, bundle, raw} {
		if err := s.writeSmallBlob(what, b); err != nil {
			return err
		}
	}
	var m v1.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return errs.Wrap(err, errs.Internal, "%s: %v", what, err)
	}
	referrer := v1.Descriptor{MediaType: types.OCIManifestSchema1, Digest: sha256Hash(raw), Size: int64(len(raw)),
		ArtifactType: provenance.BundleMediaType, Annotations: m.Annotations}

	unlock, err := lockedfile.Lock(ctx, filepath.Join(s.dir, LockFile))
	if err != nil {
		return errs.Wrap(err, errs.IO, "%s: locking %s: %v", s.addr, LockFile, err)
	}
	defer unlock()
	idx, _, err := s.readIndex()
	if err != nil {
		return err
	}
	fallback := repo + ":" + fallbackTag(sub.Digest)
	im := v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex}
	if e, ok := idx.find(fallback); ok && e.MediaType == types.OCIImageIndex {
		if old, err := s.readBlob(s.where(repo, fallbackTag(sub.Digest)), e.Digest, e.Size); err == nil {
			_ = json.Unmarshal(old, &im) // a damaged index is replaced by one holding this bundle
		}
	}
	listed := false
	for _, c := range im.Manifests {
		listed = listed || c.Digest == referrer.Digest
	}
	if !listed {
		im.Manifests = append(im.Manifests, referrer)
	}
	imRaw, err := json.Marshal(im)
	if err != nil {
		return errs.Wrap(err, errs.Internal, "%s: encoding the referrers index: %v", what, err)
	}
	if err := s.writeSmallBlob("the referrers index of "+what, imRaw); err != nil {
		return err
	}
	fallbackEntry, err := json.Marshal(v1.Descriptor{MediaType: types.OCIImageIndex, Digest: sha256Hash(imRaw), Size: int64(len(imRaw)),
		Annotations: map[string]string{AnnotationRefName: fallback}})
	if err != nil {
		return errs.Wrap(err, errs.Internal, "%s: encoding the index entry: %v", what, err)
	}
	referrerEntry, err := json.Marshal(referrer)
	if err != nil {
		return errs.Wrap(err, errs.Internal, "%s: encoding the index entry: %v", what, err)
	}
	var manifests []json.RawMessage
	present := false
	for i, e := range idx.entries {
		if e.Annotations[AnnotationRefName] == fallback {
			continue
		}
		present = present || (e.Digest == referrer.Digest.String() && e.Annotations[AnnotationRefName] == "")
		manifests = append(manifests, idx.manifests[i])
	}
	if !present {
		manifests = append(manifests, referrerEntry)
	}
	return s.writeIndex(idx.top, append(manifests, fallbackEntry))
}
