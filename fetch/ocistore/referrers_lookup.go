package ocistore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/internal/errs"
)

// A pull looks for every artifact's bundles right after resolving it, beside the download. Two
// things keep those look-ups to one round trip each on a registry without the referrers API
// (Debian's docker-registry answers 404): the manifest each resolve chose is remembered, so the
// subject is not read again, and while the registry's answer on the API is unknown a look-up asks
// the API and the fallback tag together, so that none waits for another's 404; the first answer
// on the API is remembered for the registry, and later look-ups ask only what it has.

// lookups is what one store's resolves and look-ups learned.
type lookups struct {
	mu       sync.Mutex
	subjects map[string]v1.Descriptor // by subjectKey
	api      apiVerdict
}

type apiVerdict int

const (
	apiUnknown apiVerdict = iota
	apiPresent
	apiAbsent
)

func newLookups() *lookups { return &lookups{subjects: map[string]v1.Descriptor{}} }

func subjectKey(repo, tag string, layer digest.Digest) string {
	return repo + ":" + tag + "@" + layer.String()
}

// subject remembers that repo:tag resolved to the manifest sub, whose one layer is layer.
func (l *lookups) subject(repo, tag string, layer digest.Digest, sub v1.Descriptor) {
	l.mu.Lock()
	l.subjects[subjectKey(repo, tag, layer)] = sub
	l.mu.Unlock()
}

func (l *lookups) knownSubject(repo, tag string, layer digest.Digest) (v1.Descriptor, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	sub, ok := l.subjects[subjectKey(repo, tag, layer)]
	return sub, ok
}

func (l *lookups) verdict() apiVerdict {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.api
}

// learn records what the registry answered on the referrers API.
func (l *lookups) learn(present bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.api = apiAbsent
	if present {
		l.api = apiPresent
	}
}

// referrerIndex lists the manifests that refer to sub in repository r: from the referrers API
// when the registry has it, else from the fallback tag sha256-<hex>. No index is no referrers.
func (s *registryStore) referrerIndex(ctx context.Context, r name.Repository, sub v1.Descriptor, what string) ([]v1.Descriptor, error) {
	switch s.found.verdict() {
	case apiAbsent:
		return s.fallbackTag(ctx, r, sub, what)
	case apiPresent:
		idx, present, err := s.referrersAPI(ctx, r, sub, what)
		if err != nil || present {
			return idx, err
		}
		s.found.learn(false)
		return s.fallbackTag(ctx, r, sub, what)
	}
	type tagged struct {
		idx []v1.Descriptor
		err error
	}
	tagCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	tag := make(chan tagged, 1)
	go func() {
		idx, err := s.fallbackTag(tagCtx, r, sub, what)
		tag <- tagged{idx, err}
	}()
	idx, present, err := s.referrersAPI(ctx, r, sub, what)
	if err != nil {
		return nil, err
	}
	s.found.learn(present)
	if present {
		return idx, nil
	}
	t := <-tag
	return t.idx, t.err
}

// fallbackTag reads the referrers index that registries without the API keep under the tag
// sha256-<hex> of sub.
func (s *registryStore) fallbackTag(ctx context.Context, r name.Repository, sub v1.Descriptor, what string) ([]v1.Descriptor, error) {
	opts, err := s.pullOptions(ctx, r)
	if err != nil {
		return nil, s.classify(err, what)
	}
	d, err := remote.Get(r.Tag(strings.Replace(sub.Digest.String(), ":", "-", 1)), opts...)
	var terr *transport.Error
	if errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, s.classify(err, what)
	}
	return parseReferrers(d.Manifest, what)
}

// referrersAPI asks the OCI 1.1 referrers API; present is false when the registry has none
// (404, 400, 406, or an answer that is not an image index, as go-containerregistry judges it).
func (s *registryStore) referrersAPI(ctx context.Context, r name.Repository, sub v1.Descriptor, what string) (idx []v1.Descriptor, present bool, err error) {
	rt, err := s.client(ctx, r)
	if err != nil {
		return nil, false, s.classify(err, what)
	}
	u := url.URL{Scheme: r.Scheme(), Host: r.RegistryStr(), Path: fmt.Sprintf("/v2/%s/referrers/%s", r.RepositoryStr(), sub.Digest)}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, false, errs.Wrap(err, errs.Internal, "%s: %v", what, err)
	}
	req.Header.Set("Accept", string(types.OCIImageIndex))
	resp, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		return nil, false, s.classify(err, what)
	}
	defer resp.Body.Close()
	if err := transport.CheckError(resp, http.StatusOK, http.StatusNotFound, http.StatusBadRequest, http.StatusNotAcceptable); err != nil {
		return nil, false, s.classify(err, what)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != string(types.OCIImageIndex) {
		return nil, false, nil
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBundleBytes+1))
	if err != nil {
		return nil, false, s.classify(err, what)
	}
	if len(raw) > maxBundleBytes {
		return nil, false, errs.New(errs.Integrity, "%s: the referrers index is over %d bytes; expected a few descriptors", what, maxBundleBytes)
	}
	idx, err = parseReferrers(raw, what)
	return idx, true, err
}

func parseReferrers(raw []byte, what string) ([]v1.Descriptor, error) {
	var im v1.IndexManifest
	if err := json.Unmarshal(raw, &im); err != nil {
		return nil, errs.Wrap(err, errs.Integrity, "%s: the referrers index does not parse: %v", what, err)
	}
	return im.Manifests, nil
}
