package sigstore

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/internal/errs"
)

// instanceCaches are the instances of cache, each with its folder under cache.Dir.
func instanceCaches(cache *provenance.RootsCache) ([]instanceCache, error) {
	if cache == nil || cache.Dir == "" || !filepath.IsAbs(cache.Dir) {
		return nil, errs.New(errs.Internal, "the trusted roots' cache folder must be an absolute path, found %q", clean(fmt.Sprint(cache)))
	}
	srcs, err := tufSources(cache)
	if err != nil {
		return nil, err
	}
	out := make([]instanceCache, len(srcs))
	for i, s := range srcs {
		out[i] = instanceCache{src: s, dir: filepath.Join(cache.Dir, s.instance)}
	}
	return out, nil
}

// CachedRoots is what attestations are checked against when no trusted_root file replaces it:
// each instance's root as TUF last delivered it, else the one this mur embeds. Unless offline,
// an instance whose refresh is due is refreshed first, all within onUseBudget; a refresh that
// fails costs nothing more than a note, the returned string, for the user.
func CachedRoots(ctx context.Context, cache *provenance.RootsCache) (*Roots, []string, error) {
	insts, err := instanceCaches(cache)
	if err != nil {
		return nil, nil, err
	}
	var notes []string
	if !cache.Offline {
		ctx, cancel := context.WithTimeout(ctx, onUseBudget)
		defer cancel()
		now := time.Now()
		for _, c := range insts {
			if !c.state().due(now) {
				continue
			}
			if _, err := c.refresh(ctx, false); err != nil {
				_, src := c.inUse()
				notes = append(notes, fmt.Sprintf("%s; checking against the %s; 'mur trust refresh' tries again", errs.Message(err), describeSource(c, src)))
			}
		}
	}
	r := &Roots{}
	var from []string
	for _, c := range insts {
		data, src := c.inUse()
		if err := r.add("", data); err != nil {
			return nil, nil, errs.Wrap(err, errs.Internal, "%s's trusted root from the %s does not parse: %v", c.src.instance, src, err)
		}
		from = append(from, c.src.instance+": "+describeSource(c, src))
	}
	r.source = "mur's trusted roots (" + strings.Join(from, "; ") + ")"
	return r, notes, nil
}

// describeSource names where an instance's root in use comes from, in a phrase.
func describeSource(c instanceCache, src string) string {
	if src == "cache" {
		return "root TUF delivered on " + c.state().Fetched.UTC().Format("2006-01-02")
	}
	return "root this mur embeds"
}

// RefreshRoots refreshes every instance now, within budget, and reports each. A refresh that
// fails is reported in its status, and the first such error is returned too.
func RefreshRoots(ctx context.Context, cache *provenance.RootsCache, budget time.Duration) ([]provenance.RootStatus, error) {
	insts, err := instanceCaches(cache)
	if err != nil {
		return nil, err
	}
	if cache.Offline {
		return nil, errs.New(errs.Offline, "refreshing the trusted roots needs the network, and --offline (or MUR_OFFLINE) forbids it; run it again online")
	}
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	var out []provenance.RootStatus
	var first error
	for _, c := range insts {
		st, err := c.refresh(ctx, true)
		if err != nil {
			st.Error = errs.Message(err)
			if st.Source == "cache" {
				st.Fetched = c.state().Fetched
			}
			if first == nil {
				first = err
			}
		}
		out = append(out, st)
	}
	return out, first
}

// ShowRoots reports where each instance's root in use comes from, fetching nothing.
func ShowRoots(cache *provenance.RootsCache) ([]provenance.RootStatus, error) {
	insts, err := instanceCaches(cache)
	if err != nil {
		return nil, err
	}
	var out []provenance.RootStatus
	for _, c := range insts {
		data, src := c.inUse()
		st := provenance.RootStatus{Instance: c.src.instance, Source: src, Summary: summary(data), Repository: c.src.url}
		if src == "cache" {
			st.Fetched = c.state().Fetched
		}
		out = append(out, st)
	}
	return out, nil
}

// verifyCached is Verify for a request that may carry the TUF cache: an attestation checked
// against the embedded roots (no trusted_root file, no roots of a test's own) is checked
// against the cache's instead, refreshed first when due. Only a bundle with a certificate needs
// an instance: a keyed bundle, or one that is no bundle at all, never starts a refresh.
func (l *Local) verifyCached(ctx context.Context, req provenance.Request) (provenance.Facts, []string, error) {
	if req.Roots == nil || req.Trust.RootFile != "" || l.Roots != nil || !certified(req.Bundle) {
		facts, err := l.Verify(ctx, req.Bundle, req.Digest, req.Expect, req.Trust)
		return facts, nil, err
	}
	if err := ctx.Err(); err != nil {
		return provenance.Facts{}, nil, err
	}
	l.mu.Lock()
	var notes []string
	if l.tuf == nil {
		r, n, err := CachedRoots(ctx, req.Roots)
		if err != nil {
			l.mu.Unlock()
			return provenance.Facts{}, nil, err
		}
		l.tuf, notes = r, n
	}
	roots := l.tuf
	l.mu.Unlock()
	if len(req.Trust.Keys) > 0 {
		var err error
		if roots, err = roots.WithKeys(req.Trust.Keys); err != nil {
			return provenance.Facts{}, notes, err
		}
	}
	facts, err := Verify(req.Bundle, req.Digest, req.Expect, roots)
	return facts, notes, err
}

// certified reports whether bundle carries a certificate, which a Sigstore instance must anchor.
func certified(bundle []byte) bool {
	var b struct {
		VerificationMaterial struct {
			Certificate json.RawMessage `json:"certificate"`
			Chain       json.RawMessage `json:"x509CertificateChain"`
		} `json:"verificationMaterial"`
	}
	return json.Unmarshal(bundle, &b) == nil && (len(b.VerificationMaterial.Certificate) > 0 || len(b.VerificationMaterial.Chain) > 0)
}

// rootsAnswer answers refresh-roots and show-roots.
func rootsAnswer(ctx context.Context, req provenance.Request) provenance.Response {
	var st []provenance.RootStatus
	var err error
	if req.Op == "refresh-roots" {
		st, err = RefreshRoots(ctx, req.Roots, provenance.RefreshTimeout)
	} else {
		st, err = ShowRoots(req.Roots)
	}
	resp := provenance.Response{Roots: st}
	if err != nil {
		e := provenance.ErrorResponse(err)
		resp.Token, resp.Msg = e.Token, e.Msg
	}
	return resp
}
