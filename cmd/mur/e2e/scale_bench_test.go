package e2e

import (
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
)

// BenchmarkScale is what a cold pull costs as the project grows: projects of 20, 100, 300 and
// 1,000 artifacts, each a distinct 16 KiB module, pulled from one docker-registry on loopback
// (no latency proxy: round trips don't change CPU). The payloads are small so that what grows
// with the project (the lock, per-artifact state) is not drowned by inflating, and so that the
// 1,000 take seconds, not minutes. Each size reports, over its scaleRounds rounds, taken in turn
// with the other sizes':
//
//   - cold-cpu-ms: mur's CPU, user and system, for the cold pull (--no-precompile), median, and
//     cold-registry-cpu-ms the registry's over it; cold-median-ms its wall time;
//   - empty-cpu-ms: the same command in a project that declares nothing (process start,
//     configuration), so that cold-cpu-per-artifact-ms = (cold − empty) / artifacts, the cost
//     that a fixed start-up would otherwise hide at small sizes;
//   - lock-writes: the most writes of murmur.lock in one cold pull (watchLock, exact);
//   - maxrss-MiB: mur's peak RSS in a cold pull, the largest over the rounds (ru_maxrss, measure);
//   - warm-cpu-ms, warm-median-ms, warm-lock-writes: the same pull again, the lock and the CAS
//     holding everything (a warm locked pull).
//
// Every mur process runs through the rusage tool (measure), so its CPU and peak are its own.
func BenchmarkScale(b *testing.B) {
	reg := registrytest.Start(b)
	store := "oci://" + reg.Addr() + "/murmur"
	w := newWorld(b)
	sizes := []int{20, 100, 300, 1000}
	names := pushSmall(b, w, store, sizes[len(sizes)-1])
	w.stores(store)
	measured := measureScale(b, w, reg.PID(), names, sizes)
	for _, n := range sizes {
		b.Run(strconv.Itoa(n), func(b *testing.B) { measured[n].report(b, reg.PID(), n) })
	}
}

// scaleRounds is how many rounds each size gets. A cold pull's CPU is mostly system time
// (opens, renames, fsyncs), which this VM's disk moves by a fifth or more from one minute to the
// next, so the sizes take their rounds in turn, ascending in one round and descending in the
// next, as the other rows alternate mur with its peer: a drift then moves every size alike
// instead of the size measured last.
const scaleRounds = 5

// scaleSamples is what the rounds of one size measured.
type scaleSamples struct {
	cold, warm, empty  []sample
	rss                float64
	writes, warmWrites int
}

// measureScale runs scaleRounds rounds of every size in turn; benchmarks report them afterwards.
func measureScale(b *testing.B, w *world, registry int, names []string, sizes []int) map[int]*scaleSamples {
	out := map[int]*scaleSamples{}
	for _, n := range sizes {
		out[n] = &scaleSamples{}
	}
	for round := range scaleRounds {
		order := append([]int(nil), sizes...)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, n := range order {
			out[n].round(b, w, registry, names[:n])
		}
	}
	return out
}

// pushSmall packs n distinct 16 KiB modules, pushes them to store in 4 `mur push` processes at
// once (the registry's CPU, about 30 ms a push, is most of the setup) and returns their names as
// name@version.
func pushSmall(b *testing.B, w *world, store string, n int) []string {
	dir := b.TempDir()
	var names []string
	batches := make([][]string, 4)
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("s%04d", i)
		f := artifacttest.File(b, dir, name, "1.0.0", artifacttest.Module(16<<10+i, uint64(i)))
		batches[i%len(batches)] = append(batches[i%len(batches)], f)
		names = append(names, "bench/"+name+"@1.0.0")
	}
	var wg sync.WaitGroup
	for _, batch := range batches {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := w.cmd(append(append([]string{"push", "-q"}, batch...), "--scope", "bench", "--store", store)...)
			if out, err := c.CombinedOutput(); err != nil {
				b.Errorf("mur push: %v\n%s", err, out)
			}
		}()
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	return names
}

// round measures one cold pull of names (beside the same command in a project that declares
// nothing) and the warm pull after it.
func (m *scaleSamples) round(b *testing.B, w *world, registry int, names []string) {
	pull := func() usage { return measure(b, w.cmd("pull", "-q", "--no-precompile")) }
	w.write("murmur.yaml", capsuleYAML())
	w.forget()
	m.empty = append(m.empty, sample{cpu: pull().cpu})

	w.write("murmur.yaml", capsuleYAML(names...))
	w.forget()
	syncDisks()
	lw := watchLock(b, w.project)
	start, reg := time.Now(), procCPU(registry)
	u := pull()
	m.cold = append(m.cold, sample{wall: time.Since(start), cpu: u.cpu, registry: procCPU(registry) - reg})
	m.writes, m.rss = max(m.writes, lw.writes()), max(m.rss, u.maxRSS)

	lw = watchLock(b, w.project)
	start = time.Now()
	u = pull()
	m.warm = append(m.warm, sample{wall: time.Since(start), cpu: u.cpu})
	m.warmWrites = max(m.warmWrites, lw.writes())
	if lock := w.lock(); len(lock.Artifacts) != len(names) {
		b.Fatalf("the lock pins %d artifacts after the pull, want %d", len(lock.Artifacts), len(names))
	}
}

// report gives the benchmark of size n the figures of its rounds.
func (m *scaleSamples) report(b *testing.B, registry, n int) {
	beside{registry: registry}.report(b, "cold", m.cold)
	beside{}.report(b, "warm", m.warm)
	medCPU := func(ss []sample) time.Duration {
		cpu := make([]time.Duration, len(ss))
		for i, s := range ss {
			cpu[i] = s.cpu
		}
		return median(cpu)
	}
	b.ReportMetric(ms(medCPU(m.empty)), "empty-cpu-ms")
	b.ReportMetric(ms(medCPU(m.cold)-medCPU(m.empty))/float64(n), "cold-cpu-per-artifact-ms")
	b.ReportMetric(m.rss, "maxrss-MiB")
	if m.writes >= 0 {
		b.ReportMetric(float64(m.writes), "lock-writes")
		b.ReportMetric(float64(m.warmWrites), "warm-lock-writes")
	}
	b.ReportMetric(float64(n), "artifacts")
}
