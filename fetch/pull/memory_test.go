package pull_test

import (
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"

	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/internal/bufpool"
)

// A pull holds memory in proportion to --jobs, not to how many artifacts it pulls: at 60 small
// artifacts and at 240, with one job slot, it holds at most that slot's worth (8 MiB) more than
// before it began. Per-artifact state kept for the whole pull breaks that bound at 240: a
// goroutine and its stack for every request waiting its turn, a megabyte of buffers for every
// download in flight however small its blob (8 MiB of stacks and 8 MiB of buffers, before).
// Not parallel: it measures the whole process.
func TestPullMemoryIsBoundedByJobs(t *testing.T) {
	const n, jobs, slot = 60, 1, 8 << 20
	st := pulltest.LayoutStore(t)
	reqs := pulltest.PushMany(t, st, "mem", 4*n, 0, 12000)
	for _, count := range []int{n, 4 * n} {
		w := pulltest.NewWorld(t)
		pl := w.Puller(st)
		pl.Limits.Jobs = jobs
		base, _ := memoryNow()
		m := &memoryPeak{}
		pl.Report.Events = m.event
		w.MustPull(pl, reqs[:count]...)
		if m.samples == 0 {
			t.Fatalf("%d artifacts: no commit was sampled", count)
		}
		grew := int64(m.peak) - int64(base)
		t.Logf("%d artifacts: %d KiB more at the most (%s)", count, grew>>10, m.parts)
		if grew > jobs*slot {
			t.Errorf("a pull of %d artifacts with --jobs %d held %d KiB more than before it (%s), over the %d KiB its job slots are worth",
				count, jobs, grew>>10, m.parts, jobs*slot>>10)
		}
	}
}

// memoryNow is the memory the process holds after a collection (so garbage is not counted): the
// live heap, goroutine stacks, and bufpool's buffers, which live outside the heap.
func memoryNow() (uint64, string) {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"}}
	metrics.Read(s)
	heap, stacks, lent := s[0].Value.Uint64(), s[1].Value.Uint64(), uint64(max(bufpool.LentBytes(), 0))
	return heap + stacks + lent, fmt.Sprintf("heap %d KiB, stacks %d KiB, buffers %d KiB", heap>>10, stacks>>10, lent>>10)
}

// memoryPeak is the most memory a pull held as its artifacts were done, sampled at every
// sampleEvery-th one: on events, not a clock.
type memoryPeak struct {
	mu            sync.Mutex
	done, samples int
	peak          uint64
	parts         string
}

const sampleEvery = 4

func (m *memoryPeak) event(ev pull.Event) {
	if ev.Phase != pull.PhaseDone {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done++; m.done%sampleEvery != 1 {
		return
	}
	m.samples++
	if total, parts := memoryNow(); total > m.peak {
		m.peak, m.parts = total, parts
	}
}
