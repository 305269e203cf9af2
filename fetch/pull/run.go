package pull

import (
	"context"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/fetch/internal/download"
	"github.com/murmur-nexus/mur/fetch/stage"
	"github.com/murmur-nexus/mur/internal/ref"
)

// run is what one Pull shares among its requests: the bounds on what is in flight, the one
// reading of murmur.lock, and the group commits. Pull hands it down as a field of its own copy of
// the Puller, as containerd passes its limiter to Dispatch, so that only cancellation rides in
// the context; code that runs outside a Pull (mur lock's metadata look-ups, warm's bundles) sees
// no run and waits for nothing.
type run struct {
	meta    chan struct{}   // a slot per metadata request in flight (manifests, tags, releases)
	jobs    *download.Slots // the bytes in flight: a download takes its blob's size of them
	names   []ref.Name      // every artifact of the pull, for a store to prepare for (preparer)
	once    pullOnce
	commits *group[*commitItem]
	pins    *ledger // what the commits pinned, until the pull writes murmur.lock
	records *group[cas.Record]
	staged  *stage.Budget // what the pull's payloads may still decompress to in tools/
}

// tools is the project's tools/ as this pull stages into it: within the pull's budget.
func (r *run) tools(proj Project) stage.Tools {
	t := proj.Tools()
	if r != nil {
		t.Budget = r.staged
	}
	return t
}

// appendRecord writes r durably, in a pull with the records of the pull's other requests that
// are ready at the same moment: one write and one fsync for them all. A record that can't be
// written must not undo a pull that is complete.
func (r *run) appendRecord(c *cas.Store, rec cas.Record) {
	if r != nil {
		r.records.submit(rec)
		return
	}
	_ = c.AppendRecord(rec)
}

// begin is a copy of p that carries the run of a pull of reqs. Every request resolves at once,
// up to the metadata bound; its bytes wait for one of the jobs slots, which bound the downloads
// (slots.go). Commits and records are grouped (batch.go), and the commits' pins are written once
// (ledger.go). All of it is this pull's own, handed down as the run of a copy of p.
func (p *Puller) begin(ctx context.Context, proj Project, reqs []Request, jobs int, limit int64) *Puller {
	names := make([]ref.Name, len(reqs))
	for i, r := range reqs {
		names[i] = r.Name
	}
	p = p.with(&run{meta: make(chan struct{}, p.Limits.metaJobs()), jobs: download.NewSlots(jobs), names: names, pins: &ledger{}, staged: stage.NewBudget(limit)})
	p.run.commits = &group[*commitItem]{run: func(items []*commitItem) { p.commitAll(ctx, proj, p.run.pins, items) }}
	p.run.records = &group[cas.Record]{run: func(rs []cas.Record) {
		// A record that can't be written must not undo a pull that is complete.
		_ = p.CAS.AppendRecords(rs)
	}}
	return p
}

// pinOnInterrupt writes what the pull's commits pinned into murmur.lock as soon as ctx is
// cancelled, so that Ctrl-C loses nothing that committed, however long the rest takes to wind
// down. The func it returns writes what they pinned since, once every request is over.
func (p *Puller) pinOnInterrupt(ctx context.Context, proj Project) (end func()) {
	over, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-ctx.Done():
			p.flush(ctx, proj, p.run.pins)
		case <-over:
		}
	}()
	return func() {
		close(over)
		<-watched
		p.flush(ctx, proj, p.run.pins)
	}
}

// pinFailures fails the requests whose pins the flush could not write: their blobs are in the
// CAS, but murmur.lock does not name them.
func (p *Puller) pinFailures(results []Result, errList []error) {
	for i := range results {
		if errList[i] != nil {
			continue
		}
		if err := p.run.pins.failure(results[i].Name); err != nil {
			results[i].Error, results[i].Err, errList[i] = err.Error(), err, err
			p.emit(Event{Name: results[i].Name, Phase: PhaseFailed})
		}
	}
}

// with is a copy of p that carries r.
func (p *Puller) with(r *run) *Puller {
	c := *p
	c.run = r
	return &c
}
