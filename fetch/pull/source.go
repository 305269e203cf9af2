package pull

import (
	"context"
	"errors"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/fetch/stage"
	"github.com/murmur-nexus/mur/fetch/store"
	fstore "github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
)

// fromCAS leases desc's digest and, when the CAS holds it, returns it as fetched without
// downloading anything, once its packed manifest names what it was resolved as. It returns nil,
// nil when the CAS does not hold it.
func (ft *fetcher) fromCAS(ctx context.Context, desc fstore.Descriptor, lease *cas.Lease, origin string, tok errs.Token) (*fetched, error) {
	if err := lease.Add(ctx, desc.Digest); err != nil {
		return nil, err
	}
	if !ft.cas.Has(desc.Digest) {
		return nil, nil
	}
	a, blob, err := stage.OpenPacked(ctx, ft.cas, desc.Digest)
	if errors.Is(err, errs.NotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, errs.Wrap(err, errs.TokenOf(err), "%s@%s from %s: %s", desc.Name, desc.Version, origin, errs.Message(err))
	}
	blob.Close()
	if err := packedAs(a, desc.Name, desc.Version, origin, tok); err != nil {
		return nil, err
	}
	return &fetched{desc: desc, archive: a}, nil
}

// resolveSource resolves req at the source, holding what it names to murmur.lock's pin.
func (rv *resolver) resolveSource(ctx context.Context, req Request, version string, pin pinned) (store.Sourced, error) {
	release, err := rv.run.metaSlot(ctx)
	if err != nil {
		return store.Sourced{}, err
	}
	s, err := rv.source.Resolve(ctx, req.Name, version, rv.target, pin.owner)
	release()
	if err != nil {
		return store.Sourced{}, err
	}
	return s, sourceMoved(s, req, pin)
}

// sourceMoved refuses what the source names for req when murmur.lock pins other bytes.
func sourceMoved(s store.Sourced, req Request, pin pinned) error {
	if pin.digest != "" && s.Digest != pin.digest {
		return errs.New(errs.LockConflict, "%s serves %s@%s as %s, but murmur.lock pins %s; if the new bytes are expected run 'mur pull --update %s@%s'",
			s.Origin, req.Name, s.Version, s.Digest, pin.digest, req.Name, s.Version)
	}
	return nil
}

// fromSource fetches req from the source into a resumable scratch, within a job slot, and checks
// what arrived against the pin and the digest the source reported.
func (ft *fetcher) fromSource(ctx context.Context, req Request, version string, pin pinned, lease *cas.Lease) (*fetched, error) {
	s, err := ft.resolve.resolveSource(ctx, req, version, pin)
	if err != nil {
		return nil, err
	}
	if got, err := ft.fromCAS(ctx, s.Descriptor, lease, s.Origin, errs.IndexMismatch); got != nil || err != nil {
		if got != nil {
			got.release, got.asset, got.newPin = s.Release, s.Asset, s.NewPin
		}
		return got, err
	}
	w, err := ft.cas.OpenResumable(ctx, cas.ResumeInfo{Digest: s.Digest, Size: s.Size, Store: s.Origin})
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			w.Close()
		}
	}()
	rs := ft.newSourceScratch(w, s, req.Name.String())
	release, err := ft.run.jobSlot(ctx, s.Size)
	if err != nil {
		ok = true
		w.Close()
		return nil, err
	}
	s, err = ft.resolve.source.Fetch(ctx, req.Name, version, ft.resolve.target, pin.owner, rs)
	release()
	if err != nil {
		ok = true // dropOrKeep closes it
		return nil, ft.dropOrKeep(ctx, w, err, "fetching %s@%s from %s", req.Name, version, rs.from)
	}
	if err := sourceMoved(s, req, pin); err != nil {
		return nil, err
	}
	a, err := checkDownload(w, req.Name, s.Descriptor, -1, s.Origin, errs.IndexMismatch, func() error {
		return errs.New(errs.Integrity, "%s reported %s for %s@%s but the bytes hash to %s; nothing was written", s.Origin, s.Digest, req.Name, s.Version, w.Digest())
	})
	if err != nil {
		return nil, err
	}
	ok = true
	return &fetched{w: w, desc: s.Descriptor, release: s.Release, asset: s.Asset, newPin: s.NewPin, archive: a, xfer: rs.xfer()}, nil
}
