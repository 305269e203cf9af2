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
// (cas.SyncAll), every pin is checked against the lock the pull holds (ledger.go), and the blobs
// that pass are renamed into the CAS with one fsync of its folder. So a project whose artifacts
// arrive together costs a few fsync rounds rather than one per artifact, one after another; an
// artifact that arrives alone (a small one beside a large one) is committed at once, without
// waiting for the rest. murmur.lock itself is written once, when the pull ends (ledger.go). A
// blob appears only once it is durable and its pin passed, the lock names only committed blobs,
// and a request that fails its lock check or its commit changes nothing and leaves the others
// alone.

// committer is the commit phase of a pull into proj: it checks each payload's pin against the lock
// the pull holds, commits the blobs that pass in groups, and writes their pins into murmur.lock
// once (ledger.go). What it shares with the pull's other requests is the run's; outside a Pull it
// commits and pins each payload alone.
type committer struct {
	cas     *cas.Store
	proj    Project
	lock    LockWriter // nil pins nothing: a pin that would change murmur.lock fails
	casOnly bool       // outside a project: no murmur.lock
	target  string     // the platform the pull is for
	run     *run
	report  Report // the failure of a request whose pin could not be written
}

func (p *Puller) committer(proj Project) *committer {
	return &committer{cas: p.CAS, proj: proj, lock: p.Lock, casOnly: p.CASOnly, target: p.TargetPlatform(), run: p.run, report: p.Report}
}

// commitItem is one request's share of a commit.
type commitItem struct {
	w    *cas.Writer // the fresh blob's ingest; nil for a payload the CAS held
	size int64
	want digest.Digest
	pin  *pinChange // the request's change to murmur.lock
	err  error
	// mismatch fails a --locked request whose pin would change the lock, once its blob, which
	// passed the pin's checks, is committed.
	mismatch error
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

// commitOf hands it to the pull's committer, or, outside of a pull, commits it alone and writes
// its pin at once.
func (cm *committer) commitOf(ctx context.Context, it *commitItem) error {
	if cm.run != nil {
		cm.run.commits.submit(it)
		return it.err
	}
	led := &ledger{}
	cm.commitAll(ctx, led, []*commitItem{it})
	if it.err == nil {
		cm.flush(ctx, led)
		it.err = led.failure(it.pin.name.String())
	}
	return it.err
}

// commitAll makes the items' fresh blobs durable together, checks every item's pin against the
// lock the pull holds, commits the blobs of those that pass, and notes their pins in led.
func (cm *committer) commitAll(ctx context.Context, led *ledger, items []*commitItem) {
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
	held, heldErr := cm.heldLock(led)
	var changes []*lock.Change
	pin := func() {
		for _, it := range items {
			if it.err != nil {
				continue
			}
			if heldErr != nil {
				it.err = heldErr
				continue
			}
			ch, mismatch, err := cm.tryPin(held, it.pin)
			it.err, it.mismatch = err, mismatch
			if ch != nil {
				changes = append(changes, ch)
			}
		}
	}
	pin()
	var commits []cas.Commit
	var committing []*commitItem
	for _, it := range items {
		if it.err == nil && it.w != nil {
			commits = append(commits, cas.Commit{Writer: it.w, Size: it.size, Want: it.want})
			committing = append(committing, it)
		}
	}
	failed := false
	for i, err := range cm.cas.CommitAll(ctx, commits) {
		if err != nil {
			committing[i].err, failed = err, true
		}
	}
	if failed {
		// Pin only what is in the CAS: again from the lock as it was, without the failures.
		for i := len(changes) - 1; i >= 0; i-- {
			changes[i].Undo()
		}
		changes = nil
		pin()
	}
	for _, it := range items {
		if it.err == nil && it.mismatch != nil {
			it.err = it.mismatch
		}
		if it.err == nil && !cm.casOnly && cm.lock != nil {
			led.note(it.pin)
		}
	}
}
