package pull

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	fstore "github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
)

// resolver is the resolve phase: it asks the places a request may look, in order (the stores,
// then the source), what the request resolves to, as their health allows, and resolves "latest"
// offline from what the cache knows.
type resolver struct {
	cas       *cas.Store
	stores    []fstore.Store
	source    fstore.Source // nil when no source may be asked
	fallbacks map[string]fstore.Fallback
	health    *StoreHealth
	offline   bool
	target    string // the platform the pull is for
	run       *run
	report    Report
	now       func() time.Time
}

// resolver is p's resolve phase. Its health is p's, which a Pull's open makes sure of: what runs
// outside a Pull (mur lock's metadata, warm's bundles) asks no store's health.
func (p *Puller) resolver() *resolver {
	return &resolver{cas: p.CAS, stores: p.Stores, source: p.Source, fallbacks: p.Chain.Fallbacks, health: p.Chain.Health,
		offline: p.Offline, target: p.TargetPlatform(), run: p.run, report: p.Report, now: p.now}
}

// pinned is what murmur.lock says about a request.
type pinned struct {
	version  string
	digest   digest.Digest // "" when this platform is not pinned
	platform string
	owner    *lock.ScopePin
	// provenance is what the entry recorded: from then on a verified bundle is required.
	// provenanceOf is the version it was recorded for, the entry's.
	provenance   *lock.Provenance
	provenanceOf string
}

// place is a store or the source, in the order a request asks them.
type place struct {
	store fstore.Store // nil for the source
	label string
}

func (rv *resolver) places(req Request, from []string) []place {
	var out []place
	for _, kind := range from {
		switch kind {
		case FromStores:
			for _, st := range rv.stores {
				out = append(out, place{store: st, label: st.String()})
			}
		case FromSources:
			if rv.source == nil {
				continue
			}
			if label, ok := rv.source.Label(req.Name.Scope); ok {
				out = append(out, place{label: label})
			}
		}
	}
	return out
}

// guesser is a source that can tell a scope config.yaml maps from one it only guesses.
type guesser interface{ Guess(scope string) bool }

// mappedSource is the source config.yaml maps scope to, or murmur.lock pins it to, or "" when
// there is none: a guess could have had nothing, so a miss elsewhere does not send the reader to it.
func (rv *resolver) mappedSource(scope string, pinned bool) string {
	if rv.source == nil {
		return ""
	}
	label, ok := rv.source.Label(scope)
	if g, guessing := rv.source.(guesser); !ok || !pinned && guessing && g.Guess(scope) {
		return ""
	}
	return label
}

// allFailed is the one error of a pull that every store and source failed: each place's reason
// on its own line, so that a store's "not found" is not lost behind a source's DNS error. Its
// token is that of the places that answered (see topToken). The source that was not asked is
// named only when config.yaml maps the scope to one and every place said not-found: after a
// full disk or a stopped registry, or for a scope no source serves, it would send the reader
// the wrong way.
func allFailed(what string, hints, asked []string, failures []error) error {
	tok := topToken(failures)
	hint := ""
	if len(hints) > 0 {
		hint = "; " + strings.Join(hints, "; ")
	}
	if len(asked) == 0 {
		if len(hints) == 0 {
			hint = "; no source serves its scope: add a store to config.yaml or pass --store"
		}
		return errs.New(errs.NotFound, "%s was not found: nothing was asked%s", what, hint)
	}
	if len(failures) == 1 {
		return errs.Wrap(failures[0], tok, "%s: %s%s", what, errs.Message(failures[0]), hint)
	}
	// One place a line, token first, so that a screen shows each answer whole.
	reasons := make([]string, len(failures))
	for i, err := range failures {
		msg := strings.TrimSuffix(errs.Message(err), ".")
		if !strings.Contains(msg, asked[i]) {
			msg = asked[i] + ": " + msg
		}
		reasons[i] = fmt.Sprintf("\n  %s: %s", errs.TokenOf(err), msg)
	}
	verb := "could not be pulled from"
	if tok == errs.NotFound {
		verb = "was not found in"
	}
	if hint != "" {
		hint = "\n  " + strings.TrimPrefix(hint, "; ")
	}
	return errs.Wrap(errors.Join(failures...), tok, "%s %s any of the %d places asked:%s%s", what, verb, len(failures), strings.Join(reasons, ""), hint)
}

// chainHints are the advice a chain's failure ends with: the source that was not asked, and the
// missing store.
func chainHints(source string, from []string, haveStores bool, failures []error) []string {
	var hints []string
	if source != "" && !slices.Contains(from, FromSources) && allNotFound(failures) {
		hints = append(hints, fmt.Sprintf("%s was not asked: install.from is [%s]; add sources to it to ask", source, strings.Join(from, ", ")))
	}
	if slices.Contains(from, FromStores) && !haveStores {
		hints = append(hints, NoStoreHint)
	}
	return hints
}

// topToken is the token of a chain's failure: that of a place that answered, since one that
// could not be reached (network) says nothing about the artifact. Among the places that answered,
// a failure other than not-found wins (wrong bytes, a refusal); when none answered, network.
func topToken(failures []error) errs.Token {
	tok, answered := errs.Token(""), false
	for _, err := range failures {
		t := errs.TokenOf(err)
		if t == errs.Network {
			continue
		}
		if !answered || tok == errs.NotFound {
			tok = t
		}
		answered = true
	}
	if !answered {
		if len(failures) == 0 {
			return errs.NotFound
		}
		return errs.TokenOf(failures[0])
	}
	return tok
}

func allNotFound(failures []error) bool {
	for _, err := range failures {
		if errs.TokenOf(err) != errs.NotFound {
			return false
		}
	}
	return true
}

// resolveAt turns a request into the descriptor st holds for it. A pinned digest is looked up by
// tag too, for the size the manifest declares (the bound of the download). movedTo is set when
// the tag now names other bytes for the pinned platform: that is the lock's business only if the
// pinned blob itself is gone, which Open finds out. Only a tag that serves the pinned platform
// itself can contradict the pin; an "any" payload for a platform-specific pin means the store does
// not serve that platform.
func (rv *resolver) resolveAt(ctx context.Context, st fstore.Store, req Request, version string, pin pinned) (desc fstore.Descriptor, movedTo digest.Digest, err error) {
	d, err := st.Resolve(ctx, req.Name, version, rv.target)
	d.Origin = st.String()
	switch {
	case pin.digest == "":
		return d, "", err
	case err != nil && errs.TokenOf(err) == errs.Network:
		// A store that can't answer for the tag won't serve the blob either, and asking it
		// again for the blob would cost its timeout twice.
		return fstore.Descriptor{}, "", err
	case err == nil && d.Digest == pin.digest:
		d.Platform = pin.platform
		return d, "", nil
	case err == nil && d.Platform == pin.platform:
		movedTo = d.Digest
	}
	return fstore.Descriptor{Name: req.Name, Version: version, Platform: pin.platform, Digest: pin.digest, Size: -1, Origin: st.String()}, movedTo, nil
}

// resolveStore resolves req at st, as the store's health allows: the first request to a store
// whose health is unknown probes it, and the others wait for its verdict. movedTo is resolveAt's.
func (rv *resolver) resolveStore(ctx context.Context, st fstore.Store, req Request, version string, pin pinned) (desc fstore.Descriptor, movedTo digest.Digest, err error) {
	// The metadata slot is taken before the health is asked, and given back only once the
	// health knows the outcome: the next resolve must see a failure.
	release, err := rv.run.metaSlot(ctx)
	if err != nil {
		return desc, "", err
	}
	h := rv.health
	probe, err := h.enter(ctx, st)
	if err != nil {
		release()
		return desc, "", err
	}
	if pr, ok := st.(preparer); ok && probe {
		// The probe readies the store for the whole pull (one ping, one token), and that first
		// answer is the store's verdict: every artifact's manifest is then asked at once, none
		// waiting a round trip for another's. A registry that pings but fails its manifests is
		// marked down by the first failure to come back (h.failed), for what asks after it.
		err := pr.Prepare(ctx, rv.run.pullNames(req.Name))
		h.verdict(ctx, st, err)
		if err != nil {
			h.failed(ctx, st, err)
			release()
			return desc, "", err
		}
		probe = false
	}
	desc, movedTo, err = rv.resolveAt(ctx, st, req, version, pin)
	if probe {
		h.verdict(ctx, st, err)
	}
	if err != nil {
		h.failed(ctx, st, err)
	}
	release()
	if err != nil {
		return fstore.Descriptor{}, "", err
	}
	if desc.Platform == "" {
		desc.Platform = ref.PlatformAny
	}
	return desc, movedTo, nil
}
