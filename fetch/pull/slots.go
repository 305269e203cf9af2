package pull

import (
	"context"

	"github.com/murmur-nexus/mur/internal/ref"
)

// DefaultMetaJobs bounds a pull's metadata requests in flight: enough that a project of a few
// dozen artifacts resolves in one round trip, few enough to be fair to a registry.
const DefaultMetaJobs = 32

func (l Limits) metaJobs() int {
	if l.MetaJobs < 1 {
		return DefaultMetaJobs
	}
	return l.MetaJobs
}

// preparer is a Store that readies itself for all of a pull's artifacts at once, before any is
// resolved: a registry pings once and takes one token for all of their repositories, instead of
// one per repository on each artifact's way. Its error is the store's first answer.
type preparer interface {
	Prepare(ctx context.Context, names []ref.Name) error
}

// pullNames are the artifacts of the pull, or just n outside of one.
func (r *run) pullNames(n ref.Name) []ref.Name {
	if r != nil && len(r.names) > 0 {
		return r.names
	}
	return []ref.Name{n}
}

// metaSlot waits for a metadata slot and returns its release; outside a pull it waits for nothing.
func (r *run) metaSlot(ctx context.Context) (func(), error) {
	if r == nil {
		return func() {}, nil
	}
	return take(ctx, r.meta)
}

// jobSlot waits for room for a download of size bytes (<0: not known) and returns its release.
func (r *run) jobSlot(ctx context.Context, size int64) (func(), error) {
	if r == nil {
		return func() {}, nil
	}
	return r.jobs.Take(ctx, size)
}

// tryJobSlot takes room for a download of size bytes if there is room now.
func (r *run) tryJobSlot(size int64) (func(), bool) {
	if r == nil {
		return func() {}, true
	}
	return r.jobs.TryTake(size)
}

func take(ctx context.Context, slots chan struct{}) (func(), error) {
	select {
	case slots <- struct{}{}:
		return func() { <-slots }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
