package fetch

import (
	"context"
	"slices"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
)

// PinBundle is a Sigstore bundle a place holds for the blob d of name@version, for `mur info
// --bundle-out`: the first that names d, from the stores in order (those on this machine's disk
// only, offline), then the scope's source, as far as install.from (where) lets a pull ask them.
// It is not verified here: the caller checks it, with `mur verify FILE --bundle` or cosign. from
// is the place that held it; count how many bundles for d that place holds.
func (p *Puller) PinBundle(ctx context.Context, name ref.Name, version string, d digest.Digest, where []string) (bundle []byte, from string, count int, err error) {
	type place struct {
		label string
		bf    store.BundleFinder
	}
	var places []place
	for _, st := range p.pl.Stores {
		if bf, ok := st.(store.BundleFinder); ok && slices.Contains(where, FromStores) && (!p.pl.Offline || store.IsLocal(st)) {
			places = append(places, place{st.String(), bf})
		}
	}
	if p.pl.Source != nil && slices.Contains(where, FromSources) && !p.pl.Offline {
		if label, ok := p.pl.Source.Label(name.Scope); ok {
			if bf, ok := p.pl.Source.(store.BundleFinder); ok {
				places = append(places, place{label, bf})
			}
		}
	}
	var failed error
	for _, pl := range places {
		found, err := pl.bf.Bundles(ctx, name, version, d)
		if err != nil {
			if failed == nil {
				failed = errs.Wrap(err, errs.TokenOf(err), "%s: %s", pl.label, errs.Message(err))
			}
			continue
		}
		var named [][]byte
		for _, b := range found {
			if provenance.Names(b, d) {
				named = append(named, b)
			}
		}
		if len(named) > 0 {
			return named[0], pl.label, len(named), nil
		}
	}
	if failed != nil {
		return nil, "", 0, errs.Wrap(failed, errs.TokenOf(failed), "no place held a bundle for %s@%s (%s), and one could not be asked: %s", name, version, d, errs.Message(failed))
	}
	return nil, "", 0, errs.New(errs.NotFound, "no bundle for %s@%s (%s) in the CAS (no pull verified one) or at any of the %d places asked; sign it with 'mur push --sign-key', or name the store with --store", name, version, d, len(places))
}
