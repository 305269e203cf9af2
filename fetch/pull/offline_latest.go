package pull

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/internal/safefile"
)

// versionList is the blob an online "latest" leaves in the CAS: the versions it chose from, and
// the place that listed them. An offline "latest" chooses from the newest one, so that it means
// what the place said the last time it was asked, not merely the newest version pulled.
type versionList struct {
	Name     string   `json:"name"`
	From     string   `json:"from"` // the store's address, or github:owner/repo for a scope index
	Versions []string `json:"versions"`
}

// maxVersionList bounds what is read of a cached list: it is ours, but the CAS is on disk.
const maxVersionList = 4 << 20

// keepVersionList stores the versions "latest" was resolved from in the CAS, under the pull's
// lease, and returns its digest for the pull record. A list that can't be kept only costs
// offline "latest" its answer, so it is a warning, never a failed pull.
func (rv *resolver) keepVersionList(ctx context.Context, req Request, desc store.Descriptor, lease *cas.Lease) digest.Digest {
	if len(desc.Versions) == 0 {
		return ""
	}
	b, err := json.Marshal(versionList{Name: req.Name.String(), From: desc.Origin, Versions: desc.Versions})
	if err != nil {
		return ""
	}
	d := digest.FromBytes(b)
	if err := lease.Add(ctx, d); err != nil {
		rv.report.warnf("%s: can't keep the version list \"latest\" was resolved from: %v; offline, latest will not resolve until the next online pull", req.Name, err)
		return ""
	}
	if !rv.cas.Has(d) {
		if _, err := rv.cas.Ingest(ctx, bytes.NewReader(b), int64(len(b)), d); err != nil {
			rv.report.warnf("%s: can't keep the version list \"latest\" was resolved from: %v; offline, latest will not resolve until the next online pull", req.Name, err)
			return ""
		}
	}
	return d
}

// newestVersionLists maps each artifact name to the record of its newest cached version list.
func NewestVersionLists(records []cas.Record) map[string]cas.Record {
	out := map[string]cas.Record{}
	for _, r := range records {
		if r.VersionList == "" || r.Outcome == cas.OutcomeFailed {
			continue
		}
		if cur, ok := out[r.Name]; !ok || !r.Time.Before(cur.Time) {
			out[r.Name] = r
		}
	}
	return out
}

// offlineLatest resolves "latest" with the network off, from the newest version list an online
// "latest" cached for the artifact, and says how old that list is, every time, because a newer
// release may exist. With no list cached it returns nil and no error: the pull then fails offline
// as it always did. A list whose newest version the CAS does not hold is an error that says so.
func (rv *resolver) offlineLatest(ctx context.Context, req Request, lease *cas.Lease) (*fetched, string, error) {
	records, err := rv.cas.Records("")
	if err != nil {
		return nil, "", nil
	}
	lr, ok := NewestVersionLists(records)[req.Name.String()]
	if !ok || !rv.cas.Has(lr.VersionList) {
		return nil, "", nil
	}
	if err := lease.Add(ctx, lr.VersionList); err != nil {
		return nil, "", err
	}
	b, err := safefile.ReadFile(rv.cas.Path(lr.VersionList), maxVersionList)
	var list versionList
	if err != nil || json.Unmarshal(b, &list) != nil || list.Name != req.Name.String() || sha256Digest(b) != lr.VersionList {
		return nil, "", errs.New(errs.Integrity, "the version list cached for %s (%s) is not one mur wrote for it; run 'mur cache verify', then 'mur pull %s' with network", req.Name, lr.VersionList, req.Name)
	}
	best, ok := ref.HighestSemver(list.Versions)
	if !ok {
		return nil, "", nil
	}
	what := listName(req.Name, list.From)
	age := fmt.Sprintf("%s (%s)", ago(rv.now().Sub(lr.Time)), lr.Time.UTC().Format(time.RFC3339))
	// The list names versions; the pull records say which blob each one was.
	var hit *cas.Record
	for i := range records {
		r := &records[i]
		if r.Name != req.Name.String() || r.Version != best || r.Outcome == cas.OutcomeFailed || r.Digest == "" {
			continue
		}
		if r.Platform != ref.PlatformAny && r.Platform != rv.target || !rv.cas.Has(r.Digest) {
			continue
		}
		if hit == nil || !r.Time.Before(hit.Time) {
			hit = r
		}
	}
	if hit == nil {
		return nil, "", errs.New(errs.Offline, "%s: \"latest\" is %s in the %s cached %s, but %s@%s is not in the cache and the network is off (--offline or MUR_OFFLINE); pull it with network first, or ask for a version the cache holds", req.Name, best, what, age, req.Name, best)
	}
	if err := lease.Add(ctx, hit.Digest); err != nil {
		return nil, "", err
	}
	warning := fmt.Sprintf("stale-index: %s: \"latest\" resolved to %s from the %s cached %s; run 'mur pull' online to check",
		req.Name, best, what, age)
	return &fetched{desc: store.Descriptor{Name: req.Name, Version: best, Platform: hit.Platform, Digest: hit.Digest}}, warning, nil
}

func sha256Digest(b []byte) digest.Digest {
	sum := sha256.Sum256(b)
	return digest.NewDigestFromBytes(digest.SHA256, sum[:])
}

// listName says what a cached list is: a scope's index on GitHub, or a store's tag list.
func listName(n ref.Name, from string) string {
	if strings.HasPrefix(from, "github:") {
		return fmt.Sprintf("%s index (%s)", n.Scope, from)
	}
	return fmt.Sprintf("tag list of %s at %s", n, from)
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
