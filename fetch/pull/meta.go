package pull

import (
	"context"
	"errors"
	"strings"

	fstore "github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/manifest"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
)

// MetaPin is what `mur lock` pins for one request from metadata alone.
type MetaPin struct {
	Desc   fstore.Descriptor
	NewPin *lock.ScopePin
	// Provenance is the record of the bundle that verified for Desc; nil when none did and the
	// policy let that pass.
	Provenance *lock.Provenance
	Warnings   []string
}

// PinFromMeta resolves req from metadata (a store's manifest, a source's index) and checks its
// provenance as a pull does, from the bundles its place holds and the bundle itself: never the
// payload. entry is the lock's entry for req (nil for none): the provenance it recorded makes a
// verified bundle required. A bundle that verifies is kept in the CAS, where the lock's record
// points.
func (p *Puller) PinFromMeta(ctx context.Context, req Request, version string, owner *lock.ScopePin, entry *lock.Entry) (MetaPin, error) {
	desc, newPin, bf, err := p.resolver().resolveMeta(ctx, req, version, owner)
	if err != nil {
		return MetaPin{}, err
	}
	got := &fetched{desc: desc, newPin: newPin, bundles: bf}
	var res Result
	pin := pinned{owner: owner}
	if entry != nil {
		pin.provenance, pin.provenanceOf = entry.Provenance, entry.ResolvedVersion
	}
	att := p.attestor()
	if err := att.check(ctx, req, pin, got, &res); err != nil {
		return MetaPin{}, err
	}
	m := MetaPin{Desc: desc, NewPin: newPin}
	for _, w := range res.Warnings {
		// An unsigned pin is said once, by the pull that fetches it; what a lock says is only
		// what a signer did (an unanchored bundle).
		if !strings.Contains(w, noBundleAt) {
			m.Warnings = append(m.Warnings, w)
		}
	}
	if got.verified != nil {
		if err := att.keep(ctx, got.verified); err != nil {
			return MetaPin{}, err
		}
		rec := got.verified.lockEntry()
		m.Provenance = &rec
	}
	return m, nil
}

// resolveMeta asks the places of req, in order, what version resolves to, downloading nothing: a
// store's manifest, a source's index. It also returns the place that answered, when it can hold
// Sigstore bundles.
func (rv *resolver) resolveMeta(ctx context.Context, req Request, version string, owner *lock.ScopePin) (fstore.Descriptor, *lock.ScopePin, fstore.BundleFinder, error) {
	what := req.Name.String() + "@" + version
	if req.Name.Scope == ref.ScopeLocal {
		return fstore.Descriptor{}, nil, nil, errs.New(errs.NotFound, "%s was read from a file, and no store or source serves scope local; pull the file again with 'mur pull FILE.mur.zip'", what)
	}
	if rv.offline {
		return fstore.Descriptor{}, nil, nil, errs.New(errs.Offline, "%s is not pinned in murmur.lock and the network is off (--offline or MUR_OFFLINE); run 'mur lock' with network", what)
	}
	from := req.From
	if from == nil {
		from = manifest.DefaultFrom()
	}
	var failures []error
	var asked []string
	places := rv.places(req, from)
	for i, pl := range places {
		asked = append(asked, pl.label)
		if pl.store != nil {
			d, err := pl.store.Resolve(ctx, req.Name, version, rv.target)
			if err == nil {
				d.Origin = pl.store.String()
				bf, _ := pl.store.(fstore.BundleFinder)
				return d, nil, bf, nil
			}
			if ctx.Err() != nil {
				return fstore.Descriptor{}, nil, nil, err
			}
			failures = append(failures, err)
			if i < len(places)-1 && !rv.fallsThrough(pl.store, err) {
				return fstore.Descriptor{}, nil, nil, stopped(what, pl.store, err, nil, len(places)-1-i)
			}
			continue
		}
		if owner != nil {
			if err := owner.CheckOwner(req.Name.Scope, pl.label, 0); err != nil {
				return fstore.Descriptor{}, nil, nil, err
			}
		}
		s, err := rv.source.Resolve(ctx, req.Name, version, rv.target, owner)
		if err == nil {
			s.Descriptor.Origin = s.Origin
			bf, _ := rv.source.(fstore.BundleFinder)
			return s.Descriptor, s.NewPin, bf, nil
		}
		if ctx.Err() != nil || errors.Is(err, errs.OwnerChanged) {
			return fstore.Descriptor{}, nil, nil, err
		}
		failures = append(failures, err)
	}
	hints := chainHints(rv.mappedSource(req.Name.Scope, owner != nil), from, len(rv.stores) > 0, failures)
	return fstore.Descriptor{}, nil, nil, allFailed(what, hints, asked, failures)
}

// ResolveMeta is what version of req resolves to at its places, from metadata alone, and the
// scope's new owner pin when a source answered without one.
func (p *Puller) ResolveMeta(ctx context.Context, req Request, version string, owner *lock.ScopePin) (fstore.Descriptor, *lock.ScopePin, error) {
	d, pin, _, err := p.resolver().resolveMeta(ctx, req, version, owner)
	return d, pin, err
}
