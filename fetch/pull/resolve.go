package pull

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/fetch/stage"
	fstore "github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/artifact"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/manifest"
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

func (p *Puller) resolver() *resolver {
	return &resolver{cas: p.CAS, stores: p.Stores, source: p.Source, fallbacks: p.Chain.Fallbacks, health: p.InitHealth(),
		offline: p.Offline, target: p.TargetPlatform(), run: p.run, report: p.Report, now: p.now}
}

// fetcher is the fetch phase: it walks a request's places along the chain until one serves bytes
// that pass their checks, downloading them into a CAS scratch (or finding them in the CAS), and
// starts the look-up of their bundles on the way.
type fetcher struct {
	cas     *cas.Store
	resolve *resolver
	attest  *attestor
	limits  Limits
	compile Compile // the compiled cache's key, fed as the payload streams
	report  Report
	run     *run
}

// fetcher fetches from what rv resolves.
func (p *Puller) fetcher(rv *resolver) *fetcher {
	return &fetcher{cas: p.CAS, resolve: rv, attest: p.attestor(), limits: p.Limits, compile: p.Compile, report: p.Report, run: p.run}
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

// checkDownload holds the bytes w fetched from origin to what they were resolved as: their digest,
// and their size when it is known (>= 0), refused with wrong's error; then, once they are right
// and their fsync has begun, the name and version their packed murmur.yaml says.
func checkDownload(w *cas.Writer, name ref.Name, desc fstore.Descriptor, size int64, origin string, tok errs.Token, wrong func() error) (*artifact.Archive, error) {
	if w.Digest() != desc.Digest || (size >= 0 && w.Size() != size) {
		return nil, wrong()
	}
	// The bytes are right: their fsync runs while the payload is checked and staged, and the
	// commit waits for it (batch.go).
	w.SyncSoon()
	return checkPacked(w, w.Size(), name, desc.Version, origin, tok)
}

// fetched is a payload that passed every check but the lock's: in a CAS scratch, or (w nil) a
// blob the CAS already holds.
type fetched struct {
	w       *cas.Writer
	desc    fstore.Descriptor
	release string
	asset   string
	newPin  *lock.ScopePin
	archive *artifact.Archive
	xfer    transfer      // what fetching w took
	skipped []Skipped     // the places asked before this one, and why they did not answer
	stream  *stage.Stream // the payload, staged as it downloaded; nil when it was not
	key     hash.Hash     // the compiled cache's key, fed by stream
	known   []byte        // the compiled cache's key as the cache remembers it; then key is nil
	// bundles is the place that served the payload, when it can hold Sigstore bundles;
	// verified is the one that passed the attestor's check.
	bundles  fstore.BundleFinder
	verified *verifiedBundle
	lookup   *bundleLookup // the look-up of bundles at bundles, begun on resolve; nil when not
	// slot is the download's share of --jobs, held while stream still has bytes to inflate:
	// what was downloaded and not yet followed counts as in flight, so a pull whose payloads
	// arrive faster than they inflate holds at most --jobs' worth of them in memory.
	slot func()
}

// describe sets what res says of the download got is.
func (f *fetched) describe(res *Result) {
	res.Version, res.Platform, res.Origin = f.desc.Version, f.desc.Platform, f.desc.Origin
	res.Size, res.Transferred, res.Release, res.Asset, res.NewPin = f.w.Size(), f.xfer.Bytes, f.release, f.asset, f.newPin
	res.Skipped, res.Notes, res.Resumed, res.Connections = f.skipped, f.xfer.Notes, f.xfer.Resumed, f.xfer.Conns
	res.Digest = f.w.Digest().String()
	res.private = f.desc.Private
}

// releaseSlot gives back the download's share of --jobs, if it still holds one.
func (f *fetched) releaseSlot() {
	if f != nil && f.slot != nil {
		f.slot()
		f.slot = nil
	}
}

// discard drops what a refused payload left in its scratch and staging.
func (f *fetched) discard() {
	f.lookup.stop()
	if f.w != nil {
		f.w.Close()
	}
	if f.stream != nil {
		f.stream.Abandon()
	}
}

func (ft *fetcher) fetch(ctx context.Context, req Request, version string, pin pinned, lease *cas.Lease) (*fetched, error) {
	from := req.From
	if from == nil {
		from = manifest.DefaultFrom()
	}
	what := req.Name.String() + "@" + version
	var failures []error
	var skipped []Skipped
	asked := []string{} // parallel to failures once every place has failed
	places := ft.resolve.places(req, from)
	for i, pl := range places {
		asked = append(asked, pl.label)
		var got *fetched
		var err error
		if pl.store != nil {
			got, err = ft.fromStore(ctx, pl.store, req, version, pin, lease)
			if c, ok := pl.store.(fstore.Credentialed); ok && err == nil && c.Credentialed() {
				got.desc.Private = true
			}
		} else {
			if pin.owner != nil {
				if err := pin.owner.CheckOwner(req.Name.Scope, pl.label, 0); err != nil {
					return nil, err
				}
			}
			got, err = ft.fromSource(ctx, req, version, pin, lease)
		}
		if err == nil {
			got.skipped = skipped
			if pl.store != nil {
				got.bundles, _ = pl.store.(fstore.BundleFinder)
			} else {
				got.bundles, _ = ft.resolve.source.(fstore.BundleFinder)
			}
			return got, nil
		}
		if pl.store != nil && errors.Is(err, errs.LockConflict) {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, err
		}
		failures = append(failures, err)
		skipped = append(skipped, skippedOf(pl.label, err))
		if pl.store != nil && i < len(places)-1 && !ft.resolve.fallsThrough(pl.store, err) {
			return nil, chainError(stopped(what, pl.store, err, skipped[:len(skipped)-1], len(places)-1-i), what, asked, failures, false)
		}
	}
	hints := chainHints(ft.resolve.mappedSource(req.Name.Scope, pin.owner != nil), from, len(ft.resolve.stores) > 0, failures)
	ce := chainError(allFailed(what, hints, asked, failures), what, asked, failures, false)
	for _, h := range hints {
		if h == NoStoreHint {
			ce.NoStore = true
		} else {
			ce.Hints = append(ce.Hints, h)
		}
	}
	return nil, ce
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

func (ft *fetcher) fromStore(ctx context.Context, st fstore.Store, req Request, version string, pin pinned, lease *cas.Lease) (out *fetched, outErr error) {
	desc, movedTo, err := ft.resolve.resolveStore(ctx, st, req, version, pin)
	if err != nil {
		return nil, err
	}
	// The look-up waits until the blob is in, and then takes the connection the blob's answer
	// freed: sent first, it would take the connection the manifest's answer just freed, and the
	// blob would pay a new one's handshake on the pull's critical path; sent beside the blob, it
	// would open a second connection for every artifact. A blob that waits for a job slot does
	// not hold its look-up back: that one takes the manifest's connection meanwhile.
	blobAsked := make(chan struct{})
	var askOnce sync.Once
	asked := func() { askOnce.Do(func() { close(blobAsked) }) }
	defer asked()
	lookup := ft.attest.start(ctx, st, req, pin, desc, blobAsked)
	defer func() {
		if outErr != nil {
			lookup.stop()
		}
	}()
	if got, err := ft.fromCAS(ctx, desc, lease, st.String(), errs.Integrity); got != nil || err != nil {
		if got != nil {
			got.lookup = lookup
		}
		return got, err
	}
	key, known := ft.compile.moduleKey(desc.Digest)
	release, free := ft.run.tryJobSlot(desc.Size)
	if !free {
		asked() // the blob waits for room; its look-up need not
		if release, err = ft.run.jobSlot(ctx, desc.Size); err != nil {
			return nil, err
		}
	}
	w, xfer, stream, err := ft.download(ctx, st, req, desc, key)
	asked()
	if stream == nil {
		release()
	}
	ok := false
	defer func() {
		if !ok && stream != nil {
			release()
		}
	}()
	if err != nil && movedTo != "" && errors.Is(err, errs.NotFound) {
		return nil, errs.New(errs.LockConflict,
			"%s serves %s@%s as %s, but murmur.lock pins %s; if the new bytes are expected run 'mur pull --update %s@%s', otherwise ask the publisher why the tag moved",
			st, req.Name, version, movedTo, pin.digest, req.Name, version)
	}
	if err != nil {
		ft.resolve.health.failed(ctx, st, err)
		return nil, err
	}
	defer func() {
		if !ok {
			w.Close()
			if stream != nil {
				stream.Abandon()
			}
		}
	}()
	a, err := checkDownload(w, req.Name, desc, desc.Size, st.String(), errs.Integrity, func() error {
		return errs.New(errs.Integrity, "%s served %d bytes with digest %s for %s@%s, expected %s (%d bytes); nothing was written; report it to the store's owner",
			st, w.Size(), w.Digest(), req.Name, desc.Version, desc.Digest, desc.Size)
	})
	if err != nil {
		return nil, err
	}
	ok = true
	if stream == nil { // nothing fed key
		return &fetched{w: w, desc: desc, archive: a, xfer: xfer, known: known, lookup: lookup}, nil
	}
	return &fetched{w: w, desc: desc, archive: a, xfer: xfer, stream: stream, key: key, known: known, lookup: lookup, slot: release}, nil
}
