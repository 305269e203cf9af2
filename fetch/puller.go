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
// become (transition.go) and what the cache keeps afterwards.
type Puller struct {
	*pull.Puller
	// MaxCacheSize, when positive, trims the CAS after a pull to at most this many bytes (the
	// cache: {max_size: …} of config.yaml): unpinned blobs go, least recently used first.
	MaxCacheSize int64
	// Evict removes what derives from a blob a trim removes (kept payloads, compiled modules);
	// nil leaves them to `mur cache gc`.
	Evict func(ctx context.Context, d digest.Digest, dryRun bool) []string
	// Locked pins nothing: a pull that would change murmur.lock fails with lock-mismatch.
	Locked bool

	lockWrites *atomic.Int64 // counts the pull's writes of murmur.lock, when set (export_test.go)
}

// Pull pulls reqs through the pipeline into proj, pinning them in its murmur.lock (or, outside a
// project, only into the CAS), then trims the cache to MaxCacheSize.
func (p *Puller) Pull(ctx context.Context, proj Project, reqs []Request) ([]Result, error) {
	return p.pull(ctx, proj, reqs, "", nil)
}

// pull runs the pipeline with the lock writer of this command: the one transition, which declares
// in murmur.yaml (manifestPath) what declare names as it pins it.
func (p *Puller) pull(ctx context.Context, proj Project, reqs []Request, manifestPath string, declare map[string]bool) ([]Result, error) {
	p.InitHealth() // shared by every pull of the command, so that a failed store costs its timeout once
	pp := *p.Puller
	pp.Lock = p.lockWriter(manifestPath, declare)
	results, err := pp.Pull(ctx, proj, reqs)
	p.trim(ctx, proj, results)
	return results, err
}

// trim applies MaxCacheSize once a pull that brought something in is over. What the pull pinned
// is safe: the project's lock is registered as a GC root, and is the current project's besides.
func (p *Puller) trim(ctx context.Context, proj Project, results []Result) {
	if p.MaxCacheSize <= 0 || !slices.ContainsFunc(results, func(r Result) bool { return r.Err == nil && r.Error == "" }) {
		return
	}
	rep, err := GC(ctx, GCInput{CAS: p.CAS, Project: proj.Dir, OlderThan: -1, MaxSize: p.MaxCacheSize, Evict: p.Evict})
	if err != nil {
		p.Warnf("the cache was not trimmed to cache.max_size (%d bytes): %s; run 'mur cache gc --max-size %d' to see why", p.MaxCacheSize, errs.Message(err), p.MaxCacheSize)
		return
	}
	if rep.OverMaxSize {
		p.Warnf("the cache holds %d bytes that locks pin or pulls are bringing in, over cache.max_size (%d bytes); raise it, or remove projects you no longer use and run 'mur cache gc'", rep.Size, p.MaxCacheSize)
	}
}
