package pull

import (
	"context"
	"strings"

	"github.com/opencontainers/go-digest"

	fstore "github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/manifest"
	"github.com/murmur-nexus/mur/lock"
)

// A locked pull whose blob is here asks nothing, provenance included, so a blob that came from
// elsewhere (another project's pull, an import of an older export) can sit in the CAS without
// the bundle murmur.lock records for it; `mur verify` re-checks that bundle offline and fails
// without it. Warm is what makes a project whole for offline use, so it fetches what is missing.

// warmRecordedBundle puts the bundle e records for d in the CAS when it is not there, from the
// first place of req that holds it, and returns it (nil when e records none).
func (p *Puller) RecordedBundle(ctx context.Context, req Request, e *lock.Entry, d digest.Digest) ([]byte, error) {
	if e == nil || e.Provenance == nil {
		return nil, nil
	}
	recorded := digest.Digest(e.Provenance.Bundle)
	att := p.attestor()
	if b, err := att.readSmallBlob(ctx, recorded); err == nil {
		return b, nil
	}
	what := e.Name + "@" + e.ResolvedVersion
	if p.Offline {
		return nil, errs.New(errs.Offline, "the bundle murmur.lock records for %s (%s) is not in the cache and the network is off; run 'mur warm' with network", what, recorded)
	}
	from := req.From
	if from == nil {
		from = manifest.DefaultFrom()
	}
	var asked, why []string
	rv := p.resolver()
	for _, pl := range rv.places(req, from) {
		var finder fstore.BundleFinder
		if pl.store != nil {
			finder, _ = pl.store.(fstore.BundleFinder)
		} else {
			finder, _ = rv.source.(fstore.BundleFinder)
		}
		if finder == nil {
			continue
		}
		asked = append(asked, pl.label)
		found, err := finder.Bundles(ctx, req.Name, e.ResolvedVersion, d)
		if err != nil {
			why = append(why, pl.label+": "+errs.Message(err))
			continue
		}
		for _, b := range found {
			if digest.FromBytes(b) == recorded {
				if err := att.keep(ctx, &verifiedBundle{raw: b}); err != nil {
					return nil, err
				}
				return b, nil
			}
		}
	}
	msg := "murmur.lock records the bundle " + recorded.String() + " for " + what + ", and this cache does not hold it"
	if len(asked) > 0 {
		msg = "murmur.lock records the bundle " + recorded.String() + " for " + what + ", and neither this cache nor " + strings.Join(asked, ", ") + " holds it"
	} else {
		msg += ", nor does any place of the chain that can hold bundles"
	}
	if len(why) > 0 {
		msg += " (" + strings.Join(why, "; ") + ")"
	}
	return nil, errs.New(errs.ProvenanceMissing, "%s; 'mur verify' can't re-check it offline. Import an export that carries it, or push the artifact with its bundle to a store", msg)
}
