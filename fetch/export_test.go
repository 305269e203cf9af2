package fetch

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/store"
)

// NewPuller is a Puller over the pipeline pl, for the tests that build their pipeline by hand.
func NewPuller(pl *pull.Puller) *Puller { return &Puller{pl: pl} }

// Pipeline is p's pipeline, for the tests that set or read its fields.
func (p *Puller) Pipeline() *pull.Puller { return p.pl }

// MaxCacheSize is what p trims the CAS to after a pull (0: nothing).
func (p *Puller) MaxCacheSize() int64 { return p.maxCacheSize }

// SetTrim has p trim the CAS to max bytes after a pull, evicting with evict what derives from
// each blob it removes.
func (p *Puller) SetTrim(max int64, evict func(ctx context.Context, d digest.Digest, dryRun bool) []string) {
	p.maxCacheSize, p.evict = max, evict
}

// OpenWith is o with its Puller's stores and mirror opened by openStore and openMirror (nil:
// openStore), and its source made by source (nil: none), instead of through the network.
func (o PullerOptions) OpenWith(openStore, openMirror func(addr string, plainHTTP bool) (store.Store, error), source func(sourceFor func(string) string) store.Source) PullerOptions {
	o.open = &openers{store: openStore, mirror: openMirror, source: source}
	return o
}

// SetReadSeams has murmur.yaml's reads call torn between each try's first stat and its first
// read (try counts from 0) and done once a read has its answer, either may be nil, until t ends.
// A test that sets them does not run in parallel.
func SetReadSeams(t testing.TB, torn func(path string, try int), done func(path string)) {
	readSeams.Store(&readSeam{torn: torn, done: done})
	t.Cleanup(func() { readSeams.Store(nil) })
}

// SetSettle makes d the time murmur.yaml must be left alone for a read of it to count as
// settled, until t ends.
func SetSettle(t testing.TB, d time.Duration) {
	settleNanos.Store(int64(d))
	t.Cleanup(func() { settleNanos.Store(0) })
}

// CountLockWrites counts p's writes of murmur.lock from now on.
func CountLockWrites(p *Puller) *atomic.Int64 {
	p.lockWrites = new(atomic.Int64)
	return p.lockWrites
}
