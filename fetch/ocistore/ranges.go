package ocistore

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
)

var _ fetch.RangeStore = (*registryStore)(nil)

// Ranger reads blob d of n in parts, with HTTP Range requests on one authenticated transport.
// The registries mur meets answer them as http.ServeContent does (docker-registry, and the S3 or
// GCS storage a registry redirects blob GETs to, which receive the Range header too); the
// in-process registry of go-containerregistry understands closed ranges only, which is all mur
// sends.
func (s *registryStore) Ranger(ctx context.Context, n ref.Name, d digest.Digest, size int64) (fetch.Ranger, error) {
	rt, u, what, err := s.blobURL(ctx, n, d)
	if err != nil {
		return nil, err
	}
	return &blobRanger{s: s, hc: &http.Client{Transport: rt}, url: u, size: size, what: what}, nil
}

// blobURL is where blob d of n is fetched, with the registry's authenticated transport and the
// words that name it in errors.
func (s *registryStore) blobURL(ctx context.Context, n ref.Name, d digest.Digest) (http.RoundTripper, string, string, error) {
	repo := s.repoPath(n)
	what := fmt.Sprintf("blob %s of %s at %s", d, n, s.where(repo, ""))
	if _, err := ref.ParseDigest(d.String()); err != nil {
		return nil, "", what, err
	}
	r, err := s.repository(repo)
	if err != nil {
		return nil, "", what, err
	}
	rt, err := s.client(ctx, r)
	if err != nil {
		return nil, "", what, s.classify(err, what)
	}
	u := url.URL{Scheme: r.Scheme(), Host: r.RegistryStr(), Path: fmt.Sprintf("/v2/%s/blobs/%s", r.RepositoryStr(), d)}
	return rt, u.String(), what, nil
}

type blobRanger struct {
	s    *registryStore
	hc   *http.Client
	url  string
	size int64
	what string
}

func (b *blobRanger) Open(ctx context.Context, off, end int64, validator string) (fetch.Part, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.url, nil)
	if err != nil {
		return fetch.Part{}, errs.Wrap(err, errs.Internal, "%s: %v", b.what, err)
	}
	ranged := off != 0 || end >= 0
	if ranged {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off, end))
		if validator != "" {
			req.Header.Set("If-Range", validator)
		}
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		return fetch.Part{}, b.s.classify(err, b.what)
	}
	etag := strongETag(resp.Header.Get("ETag"))
	switch {
	case resp.StatusCode == http.StatusPartialContent && ranged:
		want := fmt.Sprintf("bytes %d-%d/%d", off, end, b.size)
		got := strings.TrimSpace(resp.Header.Get("Content-Range"))
		if got != want || (resp.ContentLength >= 0 && resp.ContentLength != end-off+1) {
			resp.Body.Close()
			return fetch.Part{}, errs.Wrap(fmt.Errorf("%w: asked for %s, got Content-Range %q and %d bytes", fetch.ErrNoRanges, want, got, resp.ContentLength),
				errs.Network, "%s: the registry answered a request for bytes %d-%d with Content-Range %q", b.what, off, end, got)
		}
		return fetch.Part{Body: &blobReader{body: resp.Body, want: end - off + 1, what: b.what, store: b.s}, Validator: etag}, nil
	case resp.StatusCode == http.StatusOK:
		return fetch.Part{Body: &blobReader{body: resp.Body, want: resp.ContentLength, what: b.what, store: b.s}, Whole: true, Validator: etag}, nil
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable:
		// Its body is not worth reading: docker-registry announces the blob's length and sends a
		// line of text.
		resp.Body.Close()
		return fetch.Part{}, errs.Wrap(fmt.Errorf("%w: bytes %d-%d: HTTP 416", fetch.ErrNoRanges, off, end),
			errs.Network, "%s: the registry refused bytes %d-%d of a %d-byte blob (HTTP 416)", b.what, off, end, b.size)
	}
	err = transport.CheckError(resp, http.StatusOK, http.StatusPartialContent)
	resp.Body.Close()
	if err == nil {
		err = fmt.Errorf("HTTP %d to a request without Range", resp.StatusCode)
	}
	return fetch.Part{}, b.s.classify(err, b.what)
}

// strongETag is etag when it can validate a range: weak ETags (W/…) can't.
func strongETag(etag string) string {
	etag = strings.TrimSpace(etag)
	if etag == "" || strings.HasPrefix(etag, "W/") {
		return ""
	}
	if len(etag) < 2 || etag[0] != '"' || etag[len(etag)-1] != '"' {
		return ""
	}
	return etag
}
