package github

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/klauspost/compress/snappy"
	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
)

// maxBundle bounds one attestation bundle, compressed or not: real ones are a few KB.
const maxBundle = 4 << 20

// BundleSuffix names the release asset that carries an asset's bundle when the publisher
// uploads it beside the asset: grep-1.2.0.mur.zip.sigstore.json.
const BundleSuffix = ".sigstore.json"

// Attestations returns the Sigstore bundles GitHub holds for subject in owner/repo, from
// GET /repos/{owner}/{repo}/attestations/sha256:{hex}: each inline `bundle`, or else the
// snappy-compressed document at its `bundle_url`. A subject without attestations has none,
// without an error. The API answers public repositories without a token; GITHUB_TOKEN, when
// set, goes to the API base only, never to the storage host of a bundle_url.
func (c *Client) Attestations(ctx context.Context, owner, repo string, subject digest.Digest) ([][]byte, error) {
	var answer struct {
		Attestations []struct {
			Bundle    json.RawMessage `json:"bundle"`
			BundleURL string          `json:"bundle_url"`
		} `json:"attestations"`
	}
	u := c.apiURL("repos", owner, repo, "attestations", subject.String())
	err := c.getJSON(ctx, u, "attestations of "+subject.String()+" in "+owner+"/"+repo, &answer)
	if errors.Is(err, errs.NotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for _, a := range answer.Attestations {
		switch {
		case len(a.Bundle) > 0 && string(a.Bundle) != "null":
			out = append(out, []byte(a.Bundle))
		case a.BundleURL != "":
			b, err := c.bundleAt(ctx, a.BundleURL)
			if err != nil {
				return nil, err
			}
			out = append(out, b)
		}
	}
	return out, nil
}

// bundleAt downloads a bundle_url: a pre-signed storage link, so no credential goes with it.
func (c *Client) bundleAt(ctx context.Context, link string) ([]byte, error) {
	var data []byte
	err := c.retry(ctx, link, func(ctx context.Context) (bool, error) {
		resp, err := c.get(ctx, link, acceptBytes, nil)
		if err != nil {
			return true, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return resp.StatusCode >= 500, errs.New(errs.Network, "the attestation bundle at %s answered %d %s", redact(link), resp.StatusCode, http.StatusText(resp.StatusCode))
		}
		raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBundle+1))
		if err != nil {
			return true, err
		}
		if len(raw) > maxBundle {
			return false, errs.New(errs.ProvenanceUnverifiable, "the attestation bundle at %s is over %d bytes", redact(link), maxBundle)
		}
		n, err := snappy.DecodedLen(raw)
		if err != nil || n > maxBundle {
			return false, errs.New(errs.ProvenanceUnverifiable, "the attestation bundle at %s is not snappy-compressed JSON of at most %d bytes", redact(link), maxBundle)
		}
		data, err = snappy.Decode(nil, raw)
		if err != nil {
			return false, errs.Wrap(err, errs.ProvenanceUnverifiable, "the attestation bundle at %s does not decompress: %v", redact(link), err)
		}
		return false, nil
	})
	return data, err
}

// Bundles implements fetch.BundleFinder: the scope repository's attestations of d, and else a
// release asset named after d's asset with BundleSuffix, on the release the index names.
func (s *Source) Bundles(ctx context.Context, name ref.Name, version string, d digest.Digest) ([][]byte, error) {
	_, owner, repo, err := s.resolve(name.Scope)
	if err != nil {
		return nil, err
	}
	found, err := s.c.Attestations(ctx, owner, repo, d)
	if err != nil || len(found) > 0 {
		return found, err
	}
	si, _, err := s.index(ctx, s.c, name.Scope)
	if err != nil {
		return nil, err
	}
	for _, e := range si.ix.Artifacts {
		if e.Name != name.String() || e.Version != version || e.SHA256 != d.Encoded() {
			continue
		}
		rel := si.latest
		if e.Release != rel.TagName {
			if rel, err = s.c.ReleaseByTag(ctx, owner, repo, e.Release); err != nil {
				return nil, err
			}
		}
		a, ok := rel.Asset(e.Asset + BundleSuffix)
		if !ok {
			return nil, nil
		}
		gh, err := s.repo(ctx, s.c, owner, repo)
		if err != nil {
			return nil, err
		}
		b, err := s.c.smallAsset(ctx, owner, repo, a, gh.NeedsToken(), maxBundle)
		if err != nil {
			return nil, err
		}
		return [][]byte{b}, nil
	}
	return nil, nil
}

var _ store.BundleFinder = (*Source)(nil)
