package pull

import (
	"context"

	"github.com/murmur-nexus/mur/internal/ref"
)

// DefaultMetaJobs bounds a pull's metadata requests in flight: enough that a project of a few
// dozen artifacts resolves in one round trip, few enough to be fair to a registry.
const DefaultMetaJobs = 32

func (p *Puller) metaJobs() int {
	if p.Limits.MetaJobs < 1 {
		return DefaultMetaJobs
	}
	return p.Limits.MetaJobs
}

// preparer is a Store that readies itself for all of a pull's artifacts at once, before any is
// resolved: a registry pings once and takes one token for all of their repositories, instead of
// one per repository on each artifact's way. Its error is the store's first answer.
type preparer interface {
	Prepare(ctx context.Context, names []ref.Name) error
}

// pullNames are the artifacts of the pull, or just n outside of one.
func (p *Puller) pullNames(n ref.Name) []ref.Name {
	if p.run != nil && len(p.run.names) > 0 {
		return p.run.names
	}
	return []ref.Name{n}
}

// metaSlot waits for a metadata slot and returns its release; outside a pull it waits for nothing.
func (p *Puller) metaSlot(ctx context.Context) (func(), error) {
	if p.run == nil {
		return func() {}, nil
	}
	return take(ctx, p.run.meta)
}

// jobSlot waits for room for a download of size bytes (<0: not known) and returns its release.
func (p *Puller) jobSlot(ctx context.Context, size int64) (func(), error) {
	if p.run == nil {
		return func() {}, nil
	}
	return p.run.jobs.Take(ctx, size)
}

// tryJobSlot takes room for a download of size bytes if there is room now.
func (p *Puller) tryJobSlot(size int64) (func(), bool) {
	if p.run == nil {
		return func() {}, true
	}
	return p.run.jobs.TryTake(size)
}

func take(ctx context.Context, slots chan struct{}) (func(), error) {
	select {
	case slots <- struct{}{}:
		return func() { <-slots }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
