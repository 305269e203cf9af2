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
// subject is not read again, and the registry is asked about the API once per command (the
// store's Pool shares the answer among the stores of one registry): the first look-up probes it,
// beside its fallback tag, and the look-ups that come while the probe is out ask their fallback
// tags and wait for its answer, instead of each sending a referrers request that races the
// first answer. After that, look-ups ask only what the registry has.

// lookups is what one store's resolves learned that its bundle look-ups reuse.
type lookups struct {
	mu       sync.Mutex
	subjects map[string]v1.Descriptor // by subjectKey
}

// apiProbe is what a registry answered on the referrers API, asked once.
type apiProbe struct {
	mu      sync.Mutex
	api     apiVerdict
	probing chan struct{} // closed when the probe in flight ends; nil when none is
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

// claim is the verdict, or, while it is unknown, whether the caller is the one to probe the API
// and, if it is not, a channel closed once the probe in flight has ended.
func (a *apiProbe) claim() (v apiVerdict, probe bool, wait <-chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.api != apiUnknown:
		return a.api, false, nil
	case a.probing == nil:
		a.probing = make(chan struct{})
		return apiUnknown, true, nil
	}
	return apiUnknown, false, a.probing
}

// settle ends the probe: answered, present is the verdict; not answered (the request failed),
// the next look-up probes again.
func (a *apiProbe) settle(answered, present bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if answered {
		a.learn(present)
	}
	if a.probing != nil {
		close(a.probing)
		a.probing = nil
	}
}

// learn records the verdict; the caller holds mu.
func (a *apiProbe) learn(present bool) {
	a.api = apiAbsent
	if present {
		a.api = apiPresent
	}
}

func (a *apiProbe) absent() {
	a.mu.Lock()
	a.learn(false)
	a.mu.Unlock()
}

// tagged is what a look-up of the fallback tag found.
type tagged struct {
	idx []v1.Descriptor
	err error
}

// referrerIndex lists the manifests that refer to sub in repository r: from the referrers API
// when the registry has it, else from the fallback tag sha256-<hex>. No index is no referrers.
func (s *registryStore) referrerIndex(ctx context.Context, r name.Repository, sub v1.Descriptor, what string) ([]v1.Descriptor, error) {
	v, probe, wait := s.auth.referrers.claim()
	switch {
	case v == apiAbsent:
		return s.fallbackTag(ctx, r, sub, what)
	case v == apiPresent:
		idx, present, err := s.referrersAPI(ctx, r, sub, what)
		if err != nil || present {
			return idx, err
		}
		s.auth.referrers.absent()
		return s.fallbackTag(ctx, r, sub, what)
	}
	// The fallback tag is asked at once, beside the probe or while waiting for it, so that no
	// look-up waits for a 404 before asking it.
	tagCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	tag := make(chan tagged, 1)
	go func() {
		idx, err := s.fallbackTag(tagCtx, r, sub, what)
		tag <- tagged{idx, err}
	}()
	for !probe {
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, s.classify(ctx.Err(), what)
		}
		// A probe that failed leaves the verdict unknown, and the next claim probes again.
		switch v, probe, wait = s.auth.referrers.claim(); v {
		case apiAbsent:
			t := <-tag
			return t.idx, t.err
		case apiPresent:
			cancel()
			return s.referrerIndex(ctx, r, sub, what)
		}
	}
	idx, present, err := s.referrersAPI(ctx, r, sub, what)
	s.auth.referrers.settle(err == nil, present)
	if err != nil {
		return nil, err
	}
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

// maxDrain is how much of an answer mur reads and drops to keep its connection: an error's
// body is a few hundred bytes, and one far longer costs more to read than a new connection.
const maxDrain = 64 << 10

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
		// Read to its end, so that the connection goes back to the pool: a body closed unread
		// closes its connection, and the next request pays for a new one.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
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
