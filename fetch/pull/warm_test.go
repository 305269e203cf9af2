package pull_test

import (
	"context"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/internal/lockedfile"
	"github.com/murmur-nexus/mur/lock"
)

// A warm pull of pinned artifacts whose blobs are all here has nothing to commit: it reads
// murmur.lock once and never takes its file lock, which another process holds here for the whole
// pull. A pull that committed each cache hit would wait on that lock until the ceiling.
func TestWarmPinnedPullTakesNoLockFileLock(t *testing.T) {
	t.Parallel()
	reg := registrytest.Start(t)
	st := pulltest.OpenStore(t, "oci://"+reg.Addr()+"/murmur", ocistore.Options{})
	reqs := pulltest.PushMany(t, st, "warm", 5, 0, 900)
	w := pulltest.NewWorld(t)
	w.MustPull(w.Puller(st), reqs...)
	unlock, err := lockedfile.Lock(context.Background(), lock.GuardPath(w.Proj.LockPath()))
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	// Not a timing condition: a pull that waits for the lock's file lock never ends by itself.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := w.Puller(st).Pull(ctx, w.Proj, reqs)
	if err != nil {
		t.Fatalf("a warm pull with murmur.lock's file lock held elsewhere: %v", err)
	}
	for _, r := range res {
		if !r.CacheHit {
			t.Errorf("%s: not a cache hit", r.Name)
		}
	}
}
