package fetch_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/cputime"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/internal/slowdown/deadline"
)

// A pull writes murmur.lock once, however many artifacts it pins and however many group commits
// that takes: a pull of 300 made 34 writes when each commit wrote its own, every one a re-read
// and a rewrite of a lock that grew with the pull. Here the artifacts arrive one at a time, so
// that there are about as many commits as artifacts. Through the project verb too, whose last
// transition declares and prunes.
func TestPullWritesTheLockOnce(t *testing.T) {
	const n = 12
	st := pulltest.LayoutStore(t)
	reqs := pulltest.PushMany(t, st, "once", n, 0, 9000)
	t.Run("pull", func(t *testing.T) {
		w := newWorld(t)
		pl := oneAtATime(w, st)
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
		pl := oneAtATime(w, st)
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

// oneAtATime is w's Puller from st, whose payloads are opened one at a time: each after the
// previous artifact is done (committed, and its pin noted). So every group commit holds one
// artifact, and a lock written per group (as it was) would be written once per artifact.
func oneAtATime(w *world, st store.Store) *fetch.Puller {
	turn := make(chan struct{}, 1)
	turn <- struct{}{}
	p := w.World.Puller(&inTurn{Store: st, turn: turn})
	p.Report.Events = func(ev pull.Event) {
		if ev.Phase == pull.PhaseDone || ev.Phase == pull.PhaseFailed {
			select {
			case turn <- struct{}{}:
			default:
			}
		}
	}
	return fetch.NewPuller(p)
}

// inTurn opens a payload only when it is given the turn.
type inTurn struct {
	store.Store
	turn chan struct{}
}

func (s *inTurn) Open(ctx context.Context, n ref.Name, d digest.Digest) (io.ReadCloser, error) {
	select {
	case <-s.turn:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(deadline.Limit()):
		return nil, fmt.Errorf("%s: the artifact before it never finished", n)
	}
	return s.Store.Open(ctx, n, d)
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

// BenchmarkColdPullScale pulls N small artifacts from an OCI layout into an empty CAS and
// project, in process: the cost of a pull as a project grows. It reports the CPU (user+sys, which
// the machine's load does not move) per artifact, murmur.lock's writes per pull, and the peak
// live heap, sampled at every event of the pull. CPU per artifact at 1,000 should stay within
// 1.1x of that at 100, and the peak heap should not grow with N.
func BenchmarkColdPullScale(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			st := pulltest.LayoutStore(b)
			reqs := pulltest.PushMany(b, st, "scale", n, 0, 7000)
			var cpu time.Duration
			var peak uint64
			var writes int64
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				w := newWorld(b)
				pl := w.puller(st)
				heap := &heapPeak{}
				pl.Pipeline().Report.Events = heap.sample
				counted := fetch.CountLockWrites(pl)
				runtime.GC()
				b.StartTimer()
				before := cputime.Self()
				w.mustPull(pl, reqs...)
				cpu += cputime.Self() - before
				b.StopTimer()
				peak = max(peak, heap.max())
				writes += counted.Load()
				os.RemoveAll(filepath.Dir(w.Proj.Dir))
				b.StartTimer()
			}
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*n), "cpu-ns/artifact")
			b.ReportMetric(float64(writes)/float64(b.N), "lock-writes/op")
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
		})
	}
}

// heapPeak keeps the most live heap (the bytes of objects the last GC found live, plus what was
// allocated since) that a pull's events saw.
type heapPeak struct {
	mu   sync.Mutex
	peak uint64
	s    []metrics.Sample
}

func (h *heapPeak) sample(pull.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.s == nil {
		h.s = []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	}
	metrics.Read(h.s)
	h.peak = max(h.peak, h.s[0].Value.Uint64())
}

func (h *heapPeak) max() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.peak
}
