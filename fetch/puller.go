package fetch

import (
	"context"
	"slices"
	"sync/atomic"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/internal/errs"
)

// The pipeline's words, as the project verbs hand them to their callers: cmd/mur speaks to fetch
// only, as the Go command's main speaks to modload and never to modfetch.
type (
	Project    = pull.Project
	Request    = pull.Request
	Result     = pull.Result
	Event      = pull.Event
	Phase      = pull.Phase
	Skipped    = pull.Skipped
	MirrorPush = pull.MirrorPush
)

// DefaultConnections is how many connections one large blob is fetched over (--connections).
const DefaultConnections = pull.DefaultConnections

// FromStores and FromSources are where a pull may look, as install.from names them.
const (
	FromStores  = pull.FromStores
	FromSources = pull.FromSources
)

// The phases a pull reports in its Events.
const (
	PhaseResolve = pull.PhaseResolve
	PhaseFetch   = pull.PhaseFetch
	PhaseVerify  = pull.PhaseVerify
	PhaseCached  = pull.PhaseCached
	PhaseCompile = pull.PhaseCompile
	PhaseDone    = pull.PhaseDone
	PhaseFailed  = pull.PhaseFailed
)

// WaitForPins waits until every pull of this process has written into murmur.lock what it
// committed, or until ctx ends, and reports whether they all had: the last thing a command does
// when Ctrl-C came and it could not wind down in time, so that what finished stays pinned.
func WaitForPins(ctx context.Context) bool { return pull.WaitForPins(ctx) }

// Puller is the pull pipeline (fetch/pull) as the project verbs drive it: the pipeline brings
// artifacts into the CAS and stages them, and the verbs decide what murmur.yaml and murmur.lock
// become (transition.go) and what the cache keeps afterwards. A Workspace assembles it from a
// command's PullerOptions; the pipeline's own fields are fetch's to set.
type Puller struct {
	pl *pull.Puller
	// maxCacheSize, when positive, trims the CAS after a pull to at most this many bytes (the
	// cache: {max_size: …} of config.yaml): unpinned blobs go, least recently used first.
	maxCacheSize int64
	// evict removes what derives from a blob a trim removes; nil leaves it to `mur cache gc`.
	evict func(ctx context.Context, d digest.Digest, dryRun bool) []string
	// locked pins nothing: a pull that would change murmur.lock fails with lock-mismatch.
	locked bool

	lockWrites *atomic.Int64 // counts the pull's writes of murmur.lock, when set (export_test.go)
}

// with is a copy of p whose pipeline set changes, for one pass of a verb (a platform of warm, the
// platform verify repairs); p itself is left as it was. The copy shares p's record of store
// health, so that a failed store costs its timeout once per command.
func (p *Puller) with(set func(*pull.Puller)) *Puller {
	p.pl.InitHealth()
	pl := *p.pl
	set(&pl)
	q := *p
	q.pl = &pl
	return &q
}

// Pull pulls reqs through the pipeline into proj, pinning them in its murmur.lock (or, outside a
// project, only into the CAS), then trims the cache to the configured cache.max_size.
func (p *Puller) Pull(ctx context.Context, proj Project, reqs []Request) ([]Result, error) {
	return p.pull(ctx, proj, reqs, "", nil)
}

// pull runs the pipeline with the lock writer of this command: the one transition, which declares
// in murmur.yaml (manifestPath) what declare names as it pins it.
func (p *Puller) pull(ctx context.Context, proj Project, reqs []Request, manifestPath string, declare map[string]bool) ([]Result, error) {
	pp := p.with(func(pl *pull.Puller) { pl.Lock = p.lockWriter(manifestPath, declare) })
	results, err := pp.pl.Pull(ctx, proj, reqs)
	p.trim(ctx, proj, results)
	return results, err
}

// trim applies maxCacheSize once a pull that brought something in is over. What the pull pinned
// is safe: the project's lock is registered as a GC root, and is the current project's besides.
func (p *Puller) trim(ctx context.Context, proj Project, results []Result) {
	if p.maxCacheSize <= 0 || !slices.ContainsFunc(results, func(r Result) bool { return r.Err == nil && r.Error == "" }) {
		return
	}
	rep, err := GC(ctx, GCInput{CAS: p.pl.CAS, Project: proj.Dir, OlderThan: -1, MaxSize: p.maxCacheSize, Evict: p.evict})
	if err != nil {
		p.pl.Warnf("the cache was not trimmed to cache.max_size (%d bytes): %s; run 'mur cache gc --max-size %d' to see why", p.maxCacheSize, errs.Message(err), p.maxCacheSize)
		return
	}
	if rep.OverMaxSize {
		p.pl.Warnf("the cache holds %d bytes that locks pin or pulls are bringing in, over cache.max_size (%d bytes); raise it, or remove projects you no longer use and run 'mur cache gc'", rep.Size, p.maxCacheSize)
	}
}
