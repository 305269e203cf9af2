package fetch_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
)

// A pull writes murmur.lock once, however many artifacts it pins and however many group commits
// that takes: a pull of 300 made 34 writes when each commit wrote its own, every one a re-read
// and a rewrite of a lock that grew with the pull. Through the project verb too, whose last
// transition declares and prunes.
func TestPullWritesTheLockOnce(t *testing.T) {
	const n = 300
	st := pulltest.LayoutStore(t)
	reqs := pulltest.PushMany(t, st, "once", n, 0, 9000)
	t.Run("pull", func(t *testing.T) {
		w := newWorld(t)
		pl := w.puller(st)
		writes := fetch.CountLockWrites(pl)
		w.mustPull(pl, reqs...)
		if got := writes.Load(); got > 2 {
			t.Errorf("a pull of %d artifacts wrote murmur.lock %d times; want at most 2", n, got)
		}
		assertPinned(t, w.World, reqs)
	})
	t.Run("project", func(t *testing.T) {
		w := newWorld(t)
		in := declaring(t, w, reqs)
		pl := w.puller(st)
		writes := fetch.CountLockWrites(pl)
		if _, err := pl.PullProject(context.Background(), w.Proj, in, declaredReqs(in), fetch.SyncOptions{}); err != nil {
			t.Fatal(err)
		}
		if got := writes.Load(); got > 2 {
			t.Errorf("mur pull of a project of %d artifacts wrote murmur.lock %d times; want at most 2", n, got)
		}
		assertPinned(t, w.World, reqs)
	})
}

// declaring writes the murmur.yaml of w's project that declares reqs.
func declaring(t *testing.T, w *world, reqs []pull.Request) fetch.Intent {
	t.Helper()
	var yaml strings.Builder
	yaml.WriteString("name: many\nartifacts:\n")
	for _, r := range reqs {
		fmt.Fprintf(&yaml, "  - name: %s\n    version: %s\n", r.Name, r.Version)
	}
	return intentOf(t, w, yaml.String())
}

// assertPinned fails unless murmur.lock pins every one of reqs to a blob the CAS holds.
func assertPinned(t *testing.T, w *pulltest.World, reqs []pull.Request) {
	t.Helper()
	l := w.ReadLock()
	for _, r := range reqs {
		e := l.Find(r.Name.String())
		if e == nil {
			t.Errorf("%s is not pinned", r.Name)
			continue
		}
		if !w.CAS.Has(digest.NewDigestFromEncoded(digest.SHA256, e.SHA256.Any)) {
			t.Errorf("%s is pinned to a blob the CAS lacks", r.Name)
		}
	}
}

// When the one write of the lock fails (murmur.lock was broken mid-pull, so the transition, which
// re-reads it under the file lock, refuses), every artifact the pull committed fails with the
// reason, and the lock is left as it was: their blobs stay in the CAS for the next pull. (A
// murmur.yaml broken mid-pull is no such failure: it reads as caught mid-save, so the pins are
// written and only a prune is declined; prune.go.)
func TestFailedLockWriteFailsThePins(t *testing.T) {
	st := pulltest.LayoutStore(t)
	reqs := pulltest.PushMany(t, st, "broken", 3, 0, 9950)
	w := newWorld(t)
	in := declaring(t, w, reqs)
	pl := w.puller(st)
	const broken = "lock_version: [broken\n"
	// Broken once every artifact is done (committed and noted in the pull's ledger), so that
	// only the one write at the end meets it.
	var mu sync.Mutex
	done := 0
	pl.Pipeline().Report.Events = func(ev pull.Event) {
		if ev.Phase != pull.PhaseDone {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if done++; done == len(reqs) {
			if err := os.WriteFile(w.Proj.LockPath(), []byte(broken), 0o644); err != nil {
				t.Error(err)
			}
		}
	}
	rep, err := pl.PullProject(context.Background(), w.Proj, in, declaredReqs(in), fetch.SyncOptions{})
	if err == nil {
		t.Fatal("the pull succeeded though murmur.lock could not be written")
	}
	for _, r := range rep.Results {
		if r.Err == nil || !strings.Contains(r.Error, "is in the cache, but murmur.lock could not pin it") {
			t.Errorf("%s: error %q; want the failed write of the lock", r.Name, r.Error)
		}
		if !w.CAS.Has(digest.Digest(r.Digest)) {
			t.Errorf("%s: its blob is not in the CAS", r.Name)
		}
	}
	if b, err := os.ReadFile(w.Proj.LockPath()); err != nil || string(b) != broken {
		t.Errorf("murmur.lock was written (%v):\n%s", err, b)
	}
}
