package provenance

import (
	"context"
	"time"

	"github.com/murmur-nexus/mur/internal/errs"
)

// The Sigstore instances whose trusted roots mur-provenance refreshes through TUF.
const (
	InstancePublicGood = "public-good"
	InstanceGitHub     = "github"
)

// RefreshTimeout bounds a refresh of the trusted roots that the user asked for (mur trust
// refresh); one that a verify starts by itself has a few seconds.
const RefreshTimeout = 40 * time.Second

// Instances are the instances mur keeps trusted roots of, in the order they are shown.
var Instances = []string{InstancePublicGood, InstanceGitHub}

// RootsCache says where mur-provenance keeps the trusted roots it fetches through TUF, and
// whether it may fetch them now. A verify request without one checks against the embedded roots
// only (tests, and callers with no home).
type RootsCache struct {
	// Dir is $MURMUR_HOME/trust: one folder per instance, with its TUF metadata and the
	// trusted_root.json it last verified.
	Dir string `json:"dir"`
	// Offline forbids every fetch: the cache, else the embedded roots, are used as they are.
	Offline bool `json:"offline,omitempty"`
	// Repos replaces an instance's TUF repository and its first root of trust (the home's
	// tuf_repositories: tests and private mirrors).
	Repos []TUFRepo `json:"repos,omitempty"`
}

// TUFRepo is one entry of the home's tuf_repositories.
type TUFRepo struct {
	Instance string `json:"instance"`
	URL      string `json:"url"`
	// Root is the path of the TUF root.json trusted first, in place of the one mur embeds.
	Root string `json:"root"`
}

// RootStatus is where an instance's trusted root comes from, and what a refresh did to it.
type RootStatus struct {
	Instance string `json:"instance"`
	// Source is "tuf" (fetched by this refresh), "cache" (fetched earlier), "embedded" (the
	// one this mur ships) or "trusted_root" (the home's file replaces them all).
	Source string `json:"source"`
	// Summary counts what the root holds: "2 CA, 1 tlog key, 1 TSA".
	Summary string `json:"summary"`
	// Changed is set when a refresh replaced the root; Was is then the old root's Summary.
	Changed bool   `json:"changed"`
	Was     string `json:"was,omitempty"`
	// Fetched is when the cached root was last confirmed through TUF; zero for none.
	Fetched time.Time `json:"fetched,omitzero"`
	// Repository is the TUF repository the instance refreshes from.
	Repository string `json:"repository,omitempty"`
	// Error says why a refresh failed; the root in use is then the one Source names.
	Error string `json:"error,omitempty"`
}

// RefreshRoots has mur-provenance refresh every instance's trusted root through TUF now, however
// recent the cache, and reports each.
func (h *Helper) RefreshRoots(ctx context.Context, cache RootsCache) ([]RootStatus, error) {
	return h.roots(ctx, "refresh-roots", cache)
}

// ShowRoots reports where each instance's trusted root comes from, fetching nothing.
func (h *Helper) ShowRoots(ctx context.Context, cache RootsCache) ([]RootStatus, error) {
	return h.roots(ctx, "show-roots", cache)
}

func (h *Helper) roots(ctx context.Context, op string, cache RootsCache) ([]RootStatus, error) {
	resp, err := h.call(ctx, Request{Op: op, Roots: &cache})
	if err != nil {
		return nil, err
	}
	if len(resp.Roots) == 0 {
		if err := resp.Err(); err != nil {
			return nil, err
		}
		return nil, errs.New(errs.Internal, "%s answered %s without a status of the roots", HelperName, op)
	}
	// A refresh that failed for one instance still reports every one.
	return resp.Roots, resp.Err()
}

// note hands each note to Warn, once per Helper: every verify of a command may carry the same.
func (h *Helper) note(notes []string) {
	h.mu.Lock()
	var fresh []string
	for _, n := range notes {
		if !h.noted[n] {
			if h.noted == nil {
				h.noted = map[string]bool{}
			}
			h.noted[n] = true
			fresh = append(fresh, n)
		}
	}
	warn := h.Warn
	h.mu.Unlock()
	if warn != nil {
		for _, n := range fresh {
			warn(n)
		}
	}
}
