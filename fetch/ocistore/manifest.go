package ocistore

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
)

// Media types of SPEC section 7.
const (
	artifactType      = "application/vnd.murmur.artifact.v1"
	artifactLayerType = "application/vnd.murmur.artifact.v1+zip"
	emptyConfigType   = "application/vnd.oci.empty.v1+json"
)

// Manifest annotations that name what a store holds.
const (
	annotationName     = "dev.murmur.artifact.name"
	annotationVersion  = "dev.murmur.artifact.version"
	annotationPlatform = "dev.murmur.artifact.platform"
	annotationTitle    = "org.opencontainers.image.title"
)

// emptyConfig is the OCI empty descriptor's content, `{}`.
var emptyConfig = []byte("{}")

var emptyConfigDesc = v1.Descriptor{
	MediaType: types.MediaType(emptyConfigType),
	Size:      int64(len(emptyConfig)),
	Digest:    sha256Hash(emptyConfig),
	Data:      emptyConfig,
}

func sha256Hash(b []byte) v1.Hash {
	sum := sha256.Sum256(b)
	return v1.Hash{Algorithm: "sha256", Hex: fmt.Sprintf("%x", sum)}
}

func toHash(d digest.Digest) v1.Hash {
	return v1.Hash{Algorithm: d.Algorithm().String(), Hex: d.Encoded()}
}

func fromHash(h v1.Hash) (digest.Digest, error) { return ref.ParseDigest(h.String()) }

// platformField is the OCI platform of a mur platform tag, for tools that select on it.
func platformField(p string) *v1.Platform {
	osName, arch, ok := strings.Cut(p, "-")
	if !ok {
		return nil
	}
	switch arch {
	case "x86_64":
		arch = "amd64"
	case "aarch64":
		arch = "arm64"
	}
	return &v1.Platform{OS: osName, Architecture: arch}
}

// buildManifest is the image manifest of one payload. It holds nothing that varies between two
// pushes of the same payload (no timestamps), so a re-push writes byte-identical JSON.
func buildManifest(desc store.Descriptor) ([]byte, error) {
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  artifactType,
		Config:        emptyConfigDesc,
		Layers: []v1.Descriptor{{
			MediaType: types.MediaType(artifactLayerType),
			Size:      desc.Size,
			Digest:    toHash(desc.Digest),
		}},
		Annotations: map[string]string{
			annotationName:     desc.Name.String(),
			annotationVersion:  desc.Version,
			annotationPlatform: desc.Platform,
		},
	}
	if t := layerTitle(desc); t != "" {
		m.Layers[0].Annotations = map[string]string{annotationTitle: t}
	}
	return json.Marshal(m)
}

// layerTitle is the file name a tool such as oras writes the layer to. A platform-specific
// payload carries its platform in the name, so that pulling every manifest of an index into one
// folder gives distinct files (oras refuses duplicate names).
func layerTitle(desc store.Descriptor) string {
	if desc.Title == "" || desc.Platform == ref.PlatformAny || desc.Platform == "" {
		return desc.Title
	}
	base, ok := strings.CutSuffix(desc.Title, ".mur.zip")
	if !ok || strings.HasSuffix(base, "-"+desc.Platform) {
		return desc.Title
	}
	return base + "-" + desc.Platform + ".mur.zip"
}

// platformFromOCI is the mur platform of an OCI platform field, for manifests that other tools
// wrote without mur's platform annotation.
func platformFromOCI(p *v1.Platform) (string, bool) {
	if p == nil {
		return ref.PlatformAny, true
	}
	arch := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[p.Architecture]
	tag := p.OS + "-" + arch
	if arch == "" || ref.ValidatePlatform(tag) != nil {
		return "", false
	}
	return tag, true
}

// childDescriptor is how an index names one platform's manifest.
func childDescriptor(raw []byte, platform string) v1.Descriptor {
	return v1.Descriptor{
		MediaType:    types.OCIManifestSchema1,
		Size:         int64(len(raw)),
		Digest:       sha256Hash(raw),
		ArtifactType: artifactType,
		Annotations:  map[string]string{annotationPlatform: platform},
		Platform:     platformField(platform),
	}
}

// buildIndex is the image index of a version with several payloads, its manifests sorted by
// platform so that the same set of payloads always gives the same index.
func buildIndex(name ref.Name, version string, children []v1.Descriptor) ([]byte, error) {
	sort.SliceStable(children, func(i, j int) bool {
		return children[i].Annotations[annotationPlatform] < children[j].Annotations[annotationPlatform]
	})
	idx := v1.IndexManifest{
		SchemaVersion: 2,
		MediaType:     types.OCIImageIndex,
		ArtifactType:  artifactType,
		Manifests:     children,
		Annotations: map[string]string{
			annotationName:    name.String(),
			annotationVersion: version,
		},
	}
	return json.Marshal(idx)
}

// manifestReader is what resolving and pushing need of a store: the object a tag points at, and
// a manifest by digest.
type manifestReader interface {
	// root returns the media type and content of what repo:tag points at; errs.NotFound when the
	// repository or the tag is missing.
	root(ctx context.Context, repo, tag string) (types.MediaType, []byte, error)
	// child returns the content of the manifest d in repo.
	child(ctx context.Context, repo string, d v1.Descriptor) ([]byte, error)
	// where names repo:tag for messages, with the store's address.
	where(repo, tag string) string
}

// tagContent is what a tag holds: one manifest per platform, from a plain manifest or an index.
type tagContent struct {
	index    bool
	children []v1.Descriptor // platform annotation set on each
	// raws caches manifests already read, by digest.
	raws map[v1.Hash][]byte
}

func readTag(ctx context.Context, r manifestReader, repo, tag string) (tagContent, error) {
	mt, raw, err := r.root(ctx, repo, tag)
	if err != nil {
		return tagContent{}, err
	}
	where := r.where(repo, tag)
	switch mt {
	case types.OCIManifestSchema1:
		m, err := parseManifest(raw, where)
		if err != nil {
			return tagContent{}, err
		}
		plat := m.Annotations[annotationPlatform]
		if plat == "" {
			plat = ref.PlatformAny // a manifest another tool wrote without mur's annotations
		}
		d := childDescriptor(raw, plat)
		return tagContent{children: []v1.Descriptor{d}, raws: map[v1.Hash][]byte{d.Digest: raw}}, nil
	case types.OCIImageIndex:
		var idx v1.IndexManifest
		if err := json.Unmarshal(raw, &idx); err != nil {
			return tagContent{}, errs.Wrap(err, errs.Integrity, "%s is an OCI image index that does not parse (%v); expected a murmur artifact index; re-push the version or remove the tag", where, err)
		}
		if idx.MediaType != "" && idx.MediaType != types.OCIImageIndex {
			return tagContent{}, errs.New(errs.Integrity, "%s was served as an OCI image index but declares media type %q; re-push the version or remove the tag", where, idx.MediaType)
		}
		tc := tagContent{index: true, raws: map[v1.Hash][]byte{}}
		for _, c := range idx.Manifests {
			if c.MediaType != types.OCIManifestSchema1 {
				return tagContent{}, errs.New(errs.Integrity, "%s lists a manifest of media type %q; expected only %s manifests of murmur artifacts", where, c.MediaType, types.OCIManifestSchema1)
			}
			p, ok := c.Annotations[annotationPlatform]
			if !ok {
				// Another tool's index names platforms by the OCI platform field only.
				if p, ok = platformFromOCI(c.Platform); !ok {
					return tagContent{}, errs.New(errs.Integrity, "%s lists manifest %s for OCI platform %s/%s, which mur has no platform tag for; expected %s (any, %s)", where, c.Digest, c.Platform.OS, c.Platform.Architecture, annotationPlatform, strings.Join(ref.KnownPlatforms, ", "))
				}
			}
			if ref.ValidatePlatform(p) != nil {
				return tagContent{}, errs.New(errs.Integrity, "%s lists manifest %s with platform annotation %q; expected %s to be any or a known platform", where, c.Digest, p, annotationPlatform)
			}
			ann := map[string]string{}
			for k, v := range c.Annotations {
				ann[k] = v
			}
			ann[annotationPlatform] = p
			c.Annotations = ann
			tc.children = append(tc.children, c)
		}
		return tc, nil
	}
	return tagContent{}, errs.New(errs.Integrity, "%s is of media type %q; expected an OCI image manifest (%s) or index (%s) of a murmur artifact", where, mt, types.OCIManifestSchema1, types.OCIImageIndex)
}

// pick returns the child for platform: the exact one, else "any", never another platform.
func (tc tagContent) pick(platform string) (v1.Descriptor, bool) {
	for _, want := range []string{platform, ref.PlatformAny} {
		for _, c := range tc.children {
			if c.Annotations[annotationPlatform] == want {
				return c, true
			}
		}
	}
	return v1.Descriptor{}, false
}

func (tc tagContent) platforms() string {
	var ps []string
	for _, c := range tc.children {
		ps = append(ps, c.Annotations[annotationPlatform])
	}
	if len(ps) == 0 {
		return "no platform"
	}
	return "platforms " + strings.Join(ps, ", ")
}

// load reads and checks one child manifest.
func (tc tagContent) load(ctx context.Context, r manifestReader, repo, tag string, c v1.Descriptor, name ref.Name, version string) (store.Descriptor, error) {
	raw, ok := tc.raws[c.Digest]
	if !ok {
		var err error
		raw, err = r.child(ctx, repo, c)
		if err != nil {
			return store.Descriptor{}, err
		}
	}
	where := r.where(repo, tag)
	if c.Size != int64(len(raw)) || c.Digest != sha256Hash(raw) {
		return store.Descriptor{}, errs.New(errs.Integrity, "%s: manifest %s was served with %d bytes hashing to %s; expected %d bytes with that digest; the store is damaged or tampered with", where, c.Digest, len(raw), sha256Hash(raw), c.Size)
	}
	m, err := parseManifest(raw, where)
	if err != nil {
		return store.Descriptor{}, err
	}
	return describe(m, where, name, tag, version, c.Annotations[annotationPlatform])
}

// parseManifest checks the shape of a murmur artifact manifest strictly.
func parseManifest(raw []byte, where string) (*v1.Manifest, error) {
	var m v1.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, errs.Wrap(err, errs.Integrity, "%s: the manifest does not parse (%v); expected an OCI image manifest of a murmur artifact", where, err)
	}
	var problems []string
	if m.MediaType != types.OCIManifestSchema1 {
		problems = append(problems, fmt.Sprintf("media type %q, expected %s", m.MediaType, types.OCIManifestSchema1))
	}
	if m.ArtifactType != artifactType {
		problems = append(problems, fmt.Sprintf("artifactType %q, expected %s", m.ArtifactType, artifactType))
	}
	if string(m.Config.MediaType) != emptyConfigType {
		problems = append(problems, fmt.Sprintf("config media type %q, expected %s", m.Config.MediaType, emptyConfigType))
	}
	if len(m.Layers) != 1 {
		problems = append(problems, fmt.Sprintf("%d layers, expected exactly 1", len(m.Layers)))
	} else if string(m.Layers[0].MediaType) != artifactLayerType {
		problems = append(problems, fmt.Sprintf("layer media type %q, expected %s", m.Layers[0].MediaType, artifactLayerType))
	}
	if len(problems) > 0 {
		return nil, errs.New(errs.Integrity, "%s is not a murmur artifact manifest: it has %s; re-push the version with mur push or remove the tag", where, strings.Join(problems, "; "))
	}
	return &m, nil
}

// describe turns a checked manifest into the descriptor it names. A manifest that another tool
// (oras push with mur's artifact and layer types) wrote without mur's annotations is named by
// where it sits: the repository path gives the name, the tag the version, and a missing platform
// is the index's, else any. The caller still checks the payload's own murmur.yaml against them.
func describe(m *v1.Manifest, where string, name ref.Name, tag, asked, indexPlatform string) (store.Descriptor, error) {
	a := m.Annotations
	if got, ok := a[annotationName]; ok && got != name.String() {
		return store.Descriptor{}, errs.New(errs.Integrity, "%s: annotation %s is %q; expected %q", where, annotationName, got, name)
	}
	version, ok := a[annotationVersion]
	if !ok {
		version = ref.VersionFromTag(tag)
		if asked != ref.Latest && ref.TagFromVersion(asked) == tag {
			version = asked // '_' in a tag may stand for '+' or for itself; the request says which
		}
	}
	if err := ref.ValidateVersion(version); err != nil {
		return store.Descriptor{}, errs.New(errs.Integrity, "%s: annotation %s is %q, which is not a valid version", where, annotationVersion, version)
	}
	platform, ok := a[annotationPlatform]
	if !ok {
		platform = indexPlatform
		if platform == "" {
			platform = ref.PlatformAny
		}
	}
	if ref.ValidatePlatform(platform) != nil {
		return store.Descriptor{}, errs.New(errs.Integrity, "%s: annotation %s is %q; expected any or a known platform", where, annotationPlatform, platform)
	}
	if indexPlatform != "" && indexPlatform != platform {
		return store.Descriptor{}, errs.New(errs.Integrity, "%s: the index lists the manifest for platform %q but the manifest says %q", where, indexPlatform, platform)
	}
	l := m.Layers[0]
	d, err := fromHash(l.Digest)
	if err != nil {
		return store.Descriptor{}, errs.Wrap(err, errs.Integrity, "%s: layer digest %q is not a sha256 digest", where, l.Digest)
	}
	if l.Size < 0 {
		return store.Descriptor{}, errs.New(errs.Integrity, "%s: layer size %d is negative", where, l.Size)
	}
	return store.Descriptor{
		Name:     name,
		Version:  version,
		Platform: platform,
		Digest:   d,
		Size:     l.Size,
		Title:    l.Annotations[annotationTitle],
	}, nil
}

// resolveTag resolves repo:tag for platform, and returns the manifest it chose: the subject that
// the artifact's referrers (its provenance bundles) point at.
func resolveTag(ctx context.Context, r manifestReader, repo, tag string, name ref.Name, version, platform string) (store.Descriptor, v1.Descriptor, error) {
	tc, err := readTag(ctx, r, repo, tag)
	if err != nil {
		return store.Descriptor{}, v1.Descriptor{}, err
	}
	c, ok := tc.pick(platform)
	if !ok {
		return store.Descriptor{}, v1.Descriptor{}, errs.New(errs.NotFound, "%s holds %s@%s for %s but not for %s or any; push a payload for %s", r.where(repo, tag), name, version, tc.platforms(), platform, platform)
	}
	d, err := tc.load(ctx, r, repo, tag, c, name, version)
	if err != nil {
		return store.Descriptor{}, v1.Descriptor{}, err
	}
	if version != ref.Latest && d.Version != version {
		return store.Descriptor{}, v1.Descriptor{}, errs.New(errs.NotFound, "%s holds version %q, not %q (%s)", r.where(repo, tag), d.Version, version, sharedTag(d.Version, version))
	}
	return d, v1.Descriptor{MediaType: types.OCIManifestSchema1, Digest: c.Digest, Size: c.Size}, nil
}

// referrerTag matches the tags of the OCI referrers tag schema (sha256-<hex>, with a suffix
// such as .sig or .att for cosign's): they name a digest's referrers, never a version.
var referrerTag = regexp.MustCompile(`^sha256-[0-9a-f]{64}($|[.-])`)
