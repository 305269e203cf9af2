package pull

import (
	"context"
	"errors"
	"hash"
	"sync"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/fetch/stage"
	fstore "github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/artifact"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/manifest"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
)

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

// describe fills in what res says of the download f.
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

// fetch asks req's places in order until one serves it: a failure falls through to the next place
// as the chain says (chain.go), a lock-conflict or an interrupt stops the walk, and when every
// place failed the error says why each did.
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

// fromStore fetches req from st: resolved there (resolveStore), found in the CAS or downloaded
// within a job slot, its bundles looked up beside the download, its bytes checked (checkDownload).
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
