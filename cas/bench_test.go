package cas

import (
	"crypto/sha256"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/internal/cputime"
)

// TestIngestMemoryIsBounded streams 1 GiB and watches the heap while it does: ingest memory must
// not depend on the blob's size.
func TestIngestMemoryIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("streams 1 GiB")
	}
	const limit = 64 << 20
	grew, allocated := ingestHeap(t, 1<<30)
	t.Logf("1 GiB ingest: peak heap in use grew by %.1f MiB, %.1f MiB allocated in all", float64(grew)/(1<<20), float64(allocated)/(1<<20))
	if grew >= limit {
		t.Errorf("peak heap in use grew by %d bytes during a 1 GiB ingest, want < %d", grew, limit)
	}
	if allocated >= limit {
		t.Errorf("a 1 GiB ingest allocated %d bytes in all, want < %d", allocated, limit)
	}
}

// BenchmarkIngestPeakHeap1GiB reports the heap growth of a 1 GiB ingest for `make bench`.
func BenchmarkIngestPeakHeap1GiB(b *testing.B) {
	var worst int64
	for i := 0; i < b.N; i++ {
		grew, _ := ingestHeap(b, 1<<30)
		worst = max(worst, grew)
	}
	b.ReportMetric(float64(worst)/(1<<20), "peak-heap-MiB")
}

// ingestHeap ingests size bytes and returns how far the heap in use rose above where it started,
// sampled every 2 ms, and how much was allocated in all.
func ingestHeap(tb testing.TB, size int64) (grew int64, allocated uint64) {
	s := openStore(tb)
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	d, err := s.Ingest(ctx, newPattern(77, size), size, "")
	close(stop)
	wg.Wait()
	if err != nil {
		tb.Fatal(err)
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if info, err := s.Stat(d); err != nil || info.Size != size {
		tb.Fatalf("Stat = %+v, %v", info, err)
	}
	return int64(peak.Load()) - int64(before.HeapInuse), after.TotalAlloc - before.TotalAlloc
}

const benchSize = 256 << 20

// BenchmarkIngest256MiB is the store's ingest: hash, write, fsync, rename, fsync of the folder.
// Compare it with BenchmarkPlainCopyTee256MiB in the same run.
func BenchmarkIngest256MiB(b *testing.B) {
	s := openStore(b)
	b.SetBytes(benchSize)
	var cpu cpuMeter
	for i := 0; b.Loop(); i++ {
		cpu.start()
		d, err := s.Ingest(ctx, newPattern(uint64(i), benchSize), benchSize, "")
		if err != nil {
			b.Fatal(err)
		}
		cpu.stop()
		b.StopTimer()
		os.Remove(s.Path(d))
		b.StartTimer()
	}
	cpu.report(b)
}

// BenchmarkPlainCopyTee256MiB is the baseline: io.Copy through a sha256 tee into a file, then
// fsync, with no checks and no rename.
func BenchmarkPlainCopyTee256MiB(b *testing.B) {
	dir := b.TempDir()
	b.SetBytes(benchSize)
	var cpu cpuMeter
	for i := 0; b.Loop(); i++ {
		cpu.start()
		p := filepath.Join(dir, "plain")
		f, err := os.Create(p)
		if err != nil {
			b.Fatal(err)
		}
		h := sha256.New()
		if _, err := io.Copy(f, io.TeeReader(newPattern(uint64(i), benchSize), h)); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		f.Close()
		_ = digest.NewDigest(digest.SHA256, h)
		cpu.stop()
		b.StopTimer()
		os.Remove(p)
		b.StartTimer()
	}
	cpu.report(b)
}

// fillVerifyStore puts 64 blobs of 16 MiB in a fresh store for the verification benchmarks.
func fillVerifyStore(b *testing.B) *Store {
	b.Helper()
	s := openStore(b)
	for i := range 64 {
		if _, err := s.Ingest(ctx, newPattern(uint64(500+i), 16<<20), -1, ""); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// BenchmarkVerifyAll1GiB re-hashes 1 GiB in 64 blobs on every core. Compare it with
// BenchmarkSerialHash1GiB in the same run.
func BenchmarkVerifyAll1GiB(b *testing.B) {
	s := fillVerifyStore(b)
	b.SetBytes(64 << 24)
	b.ResetTimer()
	var cpu cpuMeter
	cpu.start()
	defer cpu.report(b)
	defer cpu.stop()
	for b.Loop() {
		rep, err := s.VerifyAll(ctx, 0)
		if err != nil || len(rep.Damaged) != 0 || rep.Checked != 64 {
			b.Fatalf("VerifyAll = %+v, %v", rep, err)
		}
	}
}

// BenchmarkSerialHash1GiB reads and hashes the same blobs on one goroutine.
func BenchmarkSerialHash1GiB(b *testing.B) {
	s := fillVerifyStore(b)
	list, err := s.List(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(64 << 24)
	buf := make([]byte, chunkSize)
	b.ResetTimer()
	var cpu cpuMeter
	cpu.start()
	defer cpu.report(b)
	defer cpu.stop()
	for b.Loop() {
		for _, info := range list {
			f, err := os.Open(s.Path(info.Digest))
			if err != nil {
				b.Fatal(err)
			}
			h := sha256.New()
			if _, err := io.CopyBuffer(h, f, buf); err != nil {
				b.Fatal(err)
			}
			f.Close()
			if digest.NewDigest(digest.SHA256, h) != info.Digest {
				b.Fatal("hash mismatch")
			}
		}
	}
}

// cpuMeter sums the CPU of a benchmark's timed parts, every thread included, and reports it per
// op as cpu-ms/op beside the wall time, which a shared machine's load moves far more.
type cpuMeter struct{ from, sum time.Duration }

func (m *cpuMeter) start() { m.from = cputime.Self() }
func (m *cpuMeter) stop()  { m.sum += cputime.Self() - m.from }

func (m *cpuMeter) report(b *testing.B) {
	if m.sum > 0 {
		b.ReportMetric(float64(m.sum.Microseconds())/1000/float64(b.N), "cpu-ms/op")
	}
}
