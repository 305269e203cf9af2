package pull

import (
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
	records *group[cas.Record]
	staged  *stage.Budget // what the pull's payloads may still decompress to in tools/
}

// tools is the project's tools/ as this pull stages into it: within the pull's budget.
func (p *Puller) tools(proj Project) stage.Tools {
	t := proj.Tools()
	if p.run != nil {
		t.Budget = p.run.staged
	}
	return t
}

// with is a copy of p that carries r.
func (p *Puller) with(r *run) *Puller {
	c := *p
	c.run = r
	return &c
}
