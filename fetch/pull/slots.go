package pull

import (
	"context"

	"github.com/murmur-nexus/mur/fetch/internal/download"
	"github.com/murmur-nexus/mur/internal/ref"
)

// DefaultMetaJobs bounds a pull's metadata requests in flight: enough that a project of a few
// dozen artifacts resolves in one round trip, few enough to be fair to a registry.
const DefaultMetaJobs = 32

func (p *Puller) metaJobs() int {
	if p.MetaJobs < 1 {
		return DefaultMetaJobs
	}
	return p.MetaJobs
}

// pullSlots bound a pull's requests: meta for metadata (resolving a tag, a release), jobs for the
// bytes in flight (a download takes its blob's size of them, its extra connections a whole slot
// each: download.Slots).
type pullSlots struct {
	meta  chan struct{}
	jobs  *download.Slots
	names []ref.Name // every artifact of the pull, for a store to prepare for (preparer)
}

type slotsKey struct{}

func withSlots(ctx context.Context, meta int, jobs *download.Slots, names []ref.Name) context.Context {
	return context.WithValue(ctx, slotsKey{}, &pullSlots{meta: make(chan struct{}, meta), jobs: jobs, names: names})
}

// preparer is a Store that readies itself for all of a pull's artifacts at once, before any is
// resolved: a registry pings once and takes one token for all of their repositories, instead of
// one per repository on each artifact's way. Its error is the store's first answer.
type preparer interface {
	Prepare(ctx context.Context, names []ref.Name) error
}

// pullNames are the artifacts of the pull ctx belongs to, or just n outside of one.
func pullNames(ctx context.Context, n ref.Name) []ref.Name {
	if s, _ := ctx.Value(slotsKey{}).(*pullSlots); s != nil && len(s.names) > 0 {
		return s.names
	}
	return []ref.Name{n}
}

// metaSlot waits for a metadata slot and returns its release; outside a pull it waits for nothing.
func metaSlot(ctx context.Context) (func(), error) {
	s, _ := ctx.Value(slotsKey{}).(*pullSlots)
	if s == nil {
		return func() {}, nil
	}
	return take(ctx, s.meta)
}

// jobSlot waits for room for a download of size bytes (<0: not known) and returns its release.
func jobSlot(ctx context.Context, size int64) (func(), error) {
	s, _ := ctx.Value(slotsKey{}).(*pullSlots)
	if s == nil {
		return func() {}, nil
	}
	return s.jobs.Take(ctx, size)
}

func take(ctx context.Context, slots chan struct{}) (func(), error) {
	select {
	case slots <- struct{}{}:
		return func() { <-slots }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
