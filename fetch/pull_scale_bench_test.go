package fetch_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/internal/cputime"
)

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
