package pull

import (
	"context"
	"sync"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/lock"
)

// Group commit. Each request of a pull resolves, downloads and checks its payload on its own, and
// then hands its commit to the pull's committer. While a commit runs, the requests that finish
// meanwhile queue, and the next commit takes them all: their fresh blobs are fsynced together
// (cas.SyncAll), and one update of murmur.lock pins every one that passes, renaming its blob into
// the CAS under the lock's file lock and fsyncing the CAS's folder once. So a project whose
// artifacts arrive together costs a few lock writes and fsync rounds rather than one of each per
// artifact, one after another; an artifact that arrives alone (a small one beside a large one)
// is committed at once, without waiting for the rest. A blob appears only once the lock will pin
// it, the lock names only durable blobs, and a request that fails its lock check or its commit
// changes nothing and leaves the others alone.

// commitItem is one request's share of a commit.
type commitItem struct {
	w     *cas.Writer // the fresh blob's ingest; nil for a payload the CAS held
	size  int64
	want  digest.Digest
	apply func(l *lock.Lock) error // the request's change to murmur.lock
	err   error
}

// group is a group commit: run takes everything submitted while the previous run was busy.
type group[T any] struct {
	mu      sync.Mutex
	queue   []T
	done    chan struct{} // closed once the batch being queued has run
	running bool
	run     func(batch []T)
}

// submit queues x and returns once a run has taken it. The first caller to find the group idle
// runs it, batch after batch, until nothing is queued.
func (g *group[T]) submit(x T) {
	g.mu.Lock()
	if g.done == nil {
		g.done = make(chan struct{})
	}
	g.queue = append(g.queue, x)
	mine := g.done
	if !g.running {
		g.running = true
		for len(g.queue) > 0 {
			batch, done := g.queue, g.done
			g.queue, g.done = nil, make(chan struct{})
			g.mu.Unlock()
			g.run(batch)
			close(done)
			g.mu.Lock()
		}
		g.running = false
	}
	g.mu.Unlock()
	<-mine
}

// commitOf hands it to the pull's committer, or commits it alone outside of a pull.
func (p *Puller) commitOf(ctx context.Context, proj Project, it *commitItem) error {
	if p.run != nil {
		p.run.commits.submit(it)
		return it.err
	}
	p.commitAll(ctx, proj, []*commitItem{it})
	return it.err
}

// commitAll makes the items' fresh blobs durable together, then pins every item that passes in
// one update of murmur.lock, committing its blob under the lock's file lock.
func (p *Puller) commitAll(ctx context.Context, proj Project, items []*commitItem) {
	var ws []*cas.Writer
	var fresh []*commitItem
	for _, it := range items {
		if it.w != nil {
			ws, fresh = append(ws, it.w), append(fresh, it)
		}
	}
	for i, err := range cas.SyncAll(ws) {
		fresh[i].err = err
	}
	err := p.writeLock(ctx, proj, func(l *lock.Lock) error {
		base := l.Clone()
		pin := func(it *commitItem) {
			before := l.Clone()
			if err := it.apply(l); err != nil {
				*l = *before
				it.err = err
			}
		}
		for _, it := range items {
			if it.err == nil {
				pin(it)
			}
		}
		var commits []cas.Commit
		var committing []*commitItem
		for _, it := range items {
			if it.err == nil && it.w != nil {
				commits = append(commits, cas.Commit{Writer: it.w, Size: it.size, Want: it.want})
				committing = append(committing, it)
			}
		}
		failed := false
		for i, err := range p.CAS.CommitAll(ctx, commits) {
			if err != nil {
				committing[i].err, failed = err, true
			}
		}
		if failed {
			// Pin only what is in the CAS: again from the lock as it was, without the failures.
			*l = *base
			for _, it := range items {
				if it.err == nil {
					pin(it)
				}
			}
		}
		return nil
	})
	if err != nil {
		for _, it := range items {
			if it.err == nil {
				it.err = err
			}
		}
	}
}
