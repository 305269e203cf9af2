package pull

import (
	"context"
	"errors"

	fstore "github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/manifest"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
)

// resolveMeta asks the places of req, in order, what version resolves to, downloading nothing: a
// store's manifest, a source's index.
func (p *Puller) ResolveMeta(ctx context.Context, req Request, version string, owner *lock.ScopePin) (fstore.Descriptor, *lock.ScopePin, error) {
	what := req.Name.String() + "@" + version
	if req.Name.Scope == ref.ScopeLocal {
		return fstore.Descriptor{}, nil, errs.New(errs.NotFound, "%s was read from a file, and no store or source serves scope local; pull the file again with 'mur pull FILE.mur.zip'", what)
	}
	if p.Offline {
		return fstore.Descriptor{}, nil, errs.New(errs.Offline, "%s is not pinned in murmur.lock and the network is off (--offline or MUR_OFFLINE); run 'mur lock' with network", what)
	}
	from := req.From
	if from == nil {
		from = manifest.DefaultFrom()
	}
	var failures []error
	var asked []string
	places := p.places(req, from)
	for i, pl := range places {
		asked = append(asked, pl.label)
		if pl.store != nil {
			d, err := pl.store.Resolve(ctx, req.Name, version, p.TargetPlatform())
			if err == nil {
				d.Origin = pl.store.String()
				return d, nil, nil
			}
			if ctx.Err() != nil {
				return fstore.Descriptor{}, nil, err
			}
			failures = append(failures, err)
			if i < len(places)-1 && !p.fallsThrough(pl.store, err) {
				return fstore.Descriptor{}, nil, stopped(what, pl.store, err, nil, len(places)-1-i)
			}
			continue
		}
		if owner != nil {
			if err := owner.CheckOwner(req.Name.Scope, pl.label, 0); err != nil {
				return fstore.Descriptor{}, nil, err
			}
		}
		s, err := p.Source.Resolve(ctx, req.Name, version, p.TargetPlatform(), owner)
		if err == nil {
			s.Descriptor.Origin = s.Origin
			return s.Descriptor, s.NewPin, nil
		}
		if ctx.Err() != nil || errors.Is(err, errs.OwnerChanged) {
			return fstore.Descriptor{}, nil, err
		}
		failures = append(failures, err)
	}
	return fstore.Descriptor{}, nil, allFailed(what, req.Name.Scope, from, len(p.Stores) > 0, asked, failures)
}
