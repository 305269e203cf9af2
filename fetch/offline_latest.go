package fetch

import (
	"context"
	"fmt"
	"time"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/internal/ref"
)

// offlineLatest resolves "latest" with the network off, from what this cache learned when it was
// online: the newest release among the versions of the artifact that the pull records name and
// whose blobs the CAS still holds, for this platform. It says how old that knowledge is, every
// time, because a newer release may exist. ok is false when the cache knows nothing: the pull
// then fails offline as it always did.
func (p *Puller) offlineLatest(ctx context.Context, req Request, lease *cas.Lease) (*fetched, string, bool) {
	records, err := p.CAS.Records("")
	if err != nil {
		return nil, "", false
	}
	type seen struct {
		r    cas.Record
		last time.Time
	}
	byVersion := map[string]*seen{}
	var versions []string
	var newest time.Time // the last time this cache asked a store or source about the artifact
	for _, r := range records {
		if r.Name != req.Name.String() || r.Outcome == cas.OutcomeFailed || r.Digest == "" {
			continue
		}
		if !r.ResolvedOffline && r.Time.After(newest) {
			newest = r.Time
		}
		if r.Platform != ref.PlatformAny && r.Platform != p.platform() || !p.CAS.Has(r.Digest) {
			continue
		}
		if s, ok := byVersion[r.Version]; !ok {
			byVersion[r.Version] = &seen{r: r, last: r.Time}
			versions = append(versions, r.Version)
		} else if r.Time.After(s.last) {
			s.r, s.last = r, r.Time
		}
	}
	best, ok := ref.HighestSemver(versions)
	if !ok || newest.IsZero() {
		return nil, "", false
	}
	r := byVersion[best].r
	if err := lease.Add(ctx, r.Digest); err != nil {
		return nil, "", false
	}
	age := p.now().Sub(newest)
	warning := fmt.Sprintf("stale-index: %s: \"latest\" resolved to %s from what this cache learned %s (%s); run 'mur pull' online to check",
		req.Name, best, ago(age), newest.UTC().Format(time.RFC3339))
	return &fetched{desc: Descriptor{Name: req.Name, Version: best, Platform: r.Platform, Digest: r.Digest}}, warning, true
}

// ago says how long ago, in the largest whole unit.
func ago(d time.Duration) string {
	switch {
	case d >= 48*time.Hour:
		return fmt.Sprintf("%d days ago", int(d/(24*time.Hour)))
	case d >= 2*time.Hour:
		return fmt.Sprintf("%d hours ago", int(d/time.Hour))
	case d >= 2*time.Minute:
		return fmt.Sprintf("%d minutes ago", int(d/time.Minute))
	}
	return "moments ago"
}
