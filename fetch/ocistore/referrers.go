package ocistore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/internal/retry"
	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
)

// Provenance travels with an artifact as OCI 1.1 referrers of its manifest, in cosign's bundle
// layout: artifactType application/vnd.dev.sigstore.bundle.v0.3+json, the empty config, one
// layer holding the bundle, and the dev.sigstore.bundle.* annotations. Registries without the
// referrers API (Debian's docker-registry) get go-containerregistry's sha256-<hex> fallback tag,
// which `oras discover` and cosign read too.

const (
	annotationBundleContent   = "dev.sigstore.bundle.content"
	annotationBundlePredicate = "dev.sigstore.bundle.predicateType"
	maxBundleBytes            = 4 << 20
)

var (
	_ store.BundleFinder   = (*registryStore)(nil)
	_ store.BundleAttacher = (*registryStore)(nil)
)

// subject finds the manifest of name@version whose layer is d: the manifest referrers point at.
func (s *registryStore) subject(ctx context.Context, n ref.Name, version string, d digest.Digest) (v1.Descriptor, error) {
	return subjectIn(ctx, s, s.repoPath(n), n, version, d)
}

// subjectIn finds, in store r's repository repo, the manifest of name@version whose layer is d.
func subjectIn(ctx context.Context, r manifestReader, repo string, n ref.Name, version string, d digest.Digest) (v1.Descriptor, error) {
	tag := ref.TagFromVersion(version)
	tc, err := readTag(ctx, r, repo, tag)
	if err != nil {
		return v1.Descriptor{}, err
	}
	for _, c := range tc.children {
		raw, ok := tc.raws[c.Digest]
		if !ok {
			if raw, err = r.child(ctx, repo, c); err != nil {
				return v1.Descriptor{}, err
			}
		}
		var m v1.Manifest
		if json.Unmarshal(raw, &m) == nil && len(m.Layers) == 1 && m.Layers[0].Digest.String() == d.String() {
			return v1.Descriptor{MediaType: types.OCIManifestSchema1, Digest: c.Digest, Size: c.Size}, nil
		}
	}
	return v1.Descriptor{}, errs.New(errs.NotFound, "%s holds no manifest of %s@%s with layer %s", r.where(repo, tag), n, version, d)
}

// Bundles implements fetch.BundleFinder: the bundles referring to the manifest of d.
// The manifest this store's resolve chose is its subject; a bundle is attached (AttachBundle) to
// the one the tag names now.
func (s *registryStore) Bundles(ctx context.Context, n ref.Name, version string, d digest.Digest) ([][]byte, error) {
	sub, ok := s.found.knownSubject(s.repoPath(n), ref.TagFromVersion(version), d)
	if !ok {
		var err error
		if sub, err = s.subject(ctx, n, version, d); err != nil {
			return nil, err
		}
	}
	r, err := s.repository(s.repoPath(n))
	if err != nil {
		return nil, err
	}
	refs, err := s.referrerIndex(ctx, r, sub, "the referrers of "+n.String()+"@"+version)
	if err != nil || len(refs) == 0 {
		return nil, err
	}
	opts, err := s.pullOptions(ctx, r)
	if err != nil {
		return nil, s.classify(err, "the referrers of "+n.String())
	}
	var out [][]byte
	for _, m := range refs {
		if m.ArtifactType != provenance.BundleMediaType || m.Size > maxBundleBytes {
			continue
		}
		raw, err := s.child(ctx, s.repoPath(n), m)
		if err != nil {
			return nil, err
		}
		var man v1.Manifest
		if json.Unmarshal(raw, &man) != nil || len(man.Layers) != 1 || man.Layers[0].Size > maxBundleBytes ||
			man.Subject == nil || man.Subject.Digest != sub.Digest {
			continue // not a bundle of this manifest in cosign's layout
		}
		l, err := remote.Layer(r.Digest(man.Layers[0].Digest.String()), opts...)
		if err != nil {
			return nil, s.classify(err, "a bundle of "+n.String())
		}
		rc, err := l.Compressed()
		if err != nil {
			return nil, s.classify(err, "a bundle of "+n.String())
		}
		b, err := io.ReadAll(io.LimitReader(rc, maxBundleBytes+1))
		rc.Close()
		if err != nil {
			return nil, s.classify(err, "a bundle of "+n.String())
		}
		if got := sha256Hash(b); got != man.Layers[0].Digest {
			return nil, errs.New(errs.Integrity, "%s served a bundle of %s@%s that hashes to %s, not %s", s.addr, n, version, got, man.Layers[0].Digest)
		}
		out = append(out, b)
	}
	return out, nil
}

// AttachBundle implements fetch.BundleAttacher: the bundle becomes a referrer of d's manifest.
func (s *registryStore) AttachBundle(ctx context.Context, n ref.Name, version string, d digest.Digest, bundle []byte) error {
	sub, err := s.subject(ctx, n, version, d)
	if err != nil {
		return err
	}
	r, err := s.repository(s.repoPath(n))
	if err != nil {
		return err
	}
	raw, err := bundleManifest(sub, bundle)
	if err != nil {
		return err
	}
	what := fmt.Sprintf("attaching the bundle of %s@%s", n, version)
	// The referrer manifest is a function of the subject and the bundle, so one HEAD tells
	// whether an earlier push (or the registry a pull-through cache serves) holds it already:
	// then nothing is written, and a registry that refuses writes is never asked to. A server
	// error is no answer, and is asked once: a pull-through cache asked for a manifest its
	// upstream lacks answers 500 however often it is asked, so the bundle counts as absent and
	// is written, which a registry that refuses writes refuses (denied, said once per command).
	readOpts, err := s.pullOptions(ctx, r)
	if err != nil {
		return s.classify(err, what)
	}
	readOpts = append(readOpts, remote.WithContext(retry.Once(ctx)))
	if _, err := remote.Head(r.Digest(sha256Hash(raw).String()), readOpts...); err == nil {
		return nil
	} else if !serverFailed(err) {
		if err := s.classify(err, what); !errors.Is(err, errs.NotFound) {
			return err
		}
	}
	opts := s.options(ctx)
	if err := remote.WriteLayer(r, static.NewLayer(emptyConfig, types.MediaType(emptyConfigType)), opts...); err != nil {
		return s.classify(err, what)
	}
	if err := remote.WriteLayer(r, static.NewLayer(bundle, types.MediaType(provenance.BundleMediaType)), opts...); err != nil {
		return s.classify(err, what)
	}
	if err := remote.Put(r.Digest(sha256Hash(raw).String()), rawManifest{raw, types.OCIManifestSchema1}, opts...); err != nil {
		return s.classify(err, what)
	}
	return nil
}

// serverFailed reports whether err is a registry's 5xx answer.
func serverFailed(err error) bool {
	var te *transport.Error
	return errors.As(err, &te) && te.StatusCode >= 500
}

// bundleManifest is cosign's referrer manifest for bundle, about the manifest sub.
func bundleManifest(sub v1.Descriptor, bundle []byte) ([]byte, error) {
	var peek struct {
		DSSE *struct {
			Payload []byte `json:"payload"`
		} `json:"dsseEnvelope"`
	}
	ann := map[string]string{annotationBundleContent: "message-signature", annotationBundlePredicate: "https://sigstore.dev/cosign/sign/v1"}
	if json.Unmarshal(bundle, &peek) == nil && peek.DSSE != nil {
		var st struct {
			PredicateType string `json:"predicateType"`
		}
		_ = json.Unmarshal(peek.DSSE.Payload, &st)
		ann[annotationBundleContent], ann[annotationBundlePredicate] = "dsse-envelope", st.PredicateType
	}
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  provenance.BundleMediaType,
		Config:        v1.Descriptor{MediaType: types.MediaType(emptyConfigType), Digest: sha256Hash(emptyConfig), Size: int64(len(emptyConfig)), Data: emptyConfig},
		Layers:        []v1.Descriptor{{MediaType: types.MediaType(provenance.BundleMediaType), Digest: sha256Hash(bundle), Size: int64(len(bundle))}},
		Subject:       &sub,
		Annotations:   ann,
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, errs.Wrap(err, errs.Internal, "encoding a bundle manifest: %v", err)
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}
