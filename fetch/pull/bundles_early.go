package pull

import (
	"context"

	"github.com/murmur-nexus/mur/fetch/config"
	"github.com/murmur-nexus/mur/fetch/store"
)

// bundleLookup is the look-up of an artifact's Sigstore bundles, started as soon as a store's
// manifest named the digest: it runs beside the download, so that on a registry a round trip
// away the bundles (or the answer that there are none) are in by the time the bytes are, instead
// of costing their round trips after the last blob.
type bundleLookup struct {
	done   chan struct{}
	found  [][]byte
	err    error
	cancel context.CancelFunc
}

// wants mirrors check: whether it will ask for the bundles of req.
func (a *attestor) wants(req Request, pin pinned) bool {
	mode := a.policy(req.Name.Scope).Mode
	return mode != config.ProvenanceOff && (a.prov.Verifier != nil || pin.provenance != nil)
}

// start starts the look-up of desc's bundles at st once after is closed, or returns nil
// when st holds none or the pull will not ask. It takes a metadata slot, like any other metadata
// request.
func (a *attestor) start(ctx context.Context, st store.Store, req Request, pin pinned, desc store.Descriptor, after <-chan struct{}) *bundleLookup {
	bf, ok := st.(store.BundleFinder)
	if !ok || !a.wants(req, pin) {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	l := &bundleLookup{done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(l.done)
		select {
		case <-after:
		case <-ctx.Done():
			l.err = ctx.Err()
			return
		}
		release, err := a.run.metaSlot(ctx)
		if err != nil {
			l.err = err
			return
		}
		defer release()
		l.found, l.err = bf.Bundles(ctx, req.Name, desc.Version, desc.Digest)
	}()
	return l
}

// wait returns what the look-up found.
func (l *bundleLookup) wait(ctx context.Context) ([][]byte, error) {
	select {
	case <-l.done:
		return l.found, l.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// stop ends a look-up whose answer is no longer wanted (or was taken); nil is fine.
func (l *bundleLookup) stop() {
	if l != nil {
		l.cancel()
	}
}
