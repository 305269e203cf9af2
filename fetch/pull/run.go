package pull

import (
	"context"
	"errors"
	"syscall"

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

// open readies a pull of reqs into proj: the lease that keeps every digest it learns from GC until
// the lock pins it, and the run (begin) it hands down as a copy of p. When it can't, every request
// fails with its error.
func (p *Puller) open(ctx context.Context, proj Project, reqs []Request) (*Puller, *cas.Lease, []Result, error) {
	jobs := p.Limits.Jobs
	if jobs < 1 {
		jobs = 4
	}
	failed := func(err error, keep bool) []Result {
		results := make([]Result, len(reqs))
		for i := range reqs {
			results[i] = Result{Name: reqs[i].Name.String(), Error: err.Error()}
			if keep {
				results[i].Err = err
			}
		}
		return results
	}
	lease, err := p.CAS.NewLease(ctx)
	if errors.Is(err, syscall.EROFS) {
		// A read-only home (a restored CI cache): nothing can be brought in, and no gc can run.
		lease, err = nil, nil
	}
	if err != nil {
		return nil, nil, failed(err, false), err
	}
	limit, err := stage.MaxPullDecompressed(p.Limits.MaxDecompressed)
	if err != nil {
		lease.Release()
		return nil, nil, failed(err, true), err
	}
	// Staging leftovers of killed pulls go before new ones are made; one that can't be removed
	// only costs disk space, and gc tries again.
	if !p.CASOnly {
		stage.Sweep(proj.Tools(), p.now(), false)
	}
	p.InitHealth()
	return p.begin(ctx, proj, reqs, jobs, limit), lease, nil, nil
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
	cm := p.committer(proj)
	p.run.commits = &group[*commitItem]{run: func(items []*commitItem) { cm.commitAll(ctx, p.run.pins, items) }}
	p.run.records = &group[cas.Record]{run: func(rs []cas.Record) {
		// A record that can't be written must not undo a pull that is complete.
		_ = p.CAS.AppendRecords(rs)
	}}
	return p
}

// phases are the phases of a pull into proj, built once for all of its requests over p's run.
type phases struct {
	proj    Project
	resolve *resolver
	attest  *attestor
	commit  *committer
	finish  *finisher
}

func (p *Puller) phases(proj Project) *phases {
	fin := p.finisher(proj)
	return &phases{proj: proj, resolve: p.resolver(), attest: fin.attest, commit: fin.commit, finish: fin}
}

// with is a copy of p that carries r.
func (p *Puller) with(r *run) *Puller {
	c := *p
	c.run = r
	return &c
}
