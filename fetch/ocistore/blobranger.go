package ocistore

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/internal/download"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
)

// Ranger reads blob d of n in parts, with HTTP Range requests on one authenticated transport.
// The registries mur meets answer them as http.ServeContent does (docker-registry, and the S3 or
// GCS storage a registry redirects blob GETs to, which receive the Range header too); the
// in-process registry of go-containerregistry understands closed ranges only, which is all mur
// sends.
func (s *registryStore) Ranger(ctx context.Context, n ref.Name, d digest.Digest, size int64) (download.Ranger, error) {
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

func (b *blobRanger) Open(ctx context.Context, off, end int64, validator string) (download.Part, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.url, nil)
	if err != nil {
		return download.Part{}, errs.Wrap(err, errs.Internal, "%s: %v", b.what, err)
	}
	download.Header(req.Header, off, end, validator)
	resp, err := b.hc.Do(req)
	if err != nil {
		return download.Part{}, b.s.classify(err, b.what)
	}
	if part, handled, err := download.Answer(resp, off, end, b.size, b.what, b.classify); handled {
		return part, err
	}
	err = transport.CheckError(resp, http.StatusOK, http.StatusPartialContent)
	resp.Body.Close()
	if err == nil {
		err = fmt.Errorf("HTTP %d to a request without Range", resp.StatusCode)
	}
	return download.Part{}, b.s.classify(err, b.what)
}

func (b *blobRanger) classify(err error) error { return b.s.classify(err, b.what) }
