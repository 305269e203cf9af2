//go:build unix

package cas

import (
	"crypto/sha256"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/internal/bufpool"
)

// The write path's cost per byte, against a plain io.Copy of the same bytes to a file: what a
// cold pull pays to hash and write a blob beyond what receiving it costs. Each variant reports the
// process's CPU (user and system, every thread) per byte written and its wall time; the source
// is one random block copied over and over, so that making the bytes costs next to nothing.
//
//	go test -run '^$' -bench BenchmarkWritePath -benchtime 5x ./cas

const writePathSize = 256 << 20

// blockSource yields size bytes of a fixed random block, as a socket's reads would: one copy each.
type blockSource struct {
	block []byte
	left  int64
	off   int
}

func newBlockSource(size int64) *blockSource {
	return &blockSource{block: patternBytes(9, 4<<20), left: size}
}

func (s *blockSource) Read(p []byte) (int, error) {
	if s.left == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > s.left {
		p = p[:s.left]
	}
	n := copy(p, s.block[s.off:])
	s.off = (s.off + n) % len(s.block)
	s.left -= int64(n)
	return n, nil
}

// cpuTime is the CPU, user and system, this process has taken so far.
func cpuTime(tb testing.TB) (user, sys time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

// measureWrites runs one write of writePathSize bytes per iteration and reports CPU per byte.
func measureWrites(b *testing.B, once func(i int)) {
	b.SetBytes(writePathSize)
	var user, sys time.Duration
	for i := 0; b.Loop(); i++ {
		u0, s0 := cpuTime(b)
		once(i)
		u1, s1 := cpuTime(b)
		user, sys = user+u1-u0, sys+s1-s0
	}
	perByte := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N) / writePathSize }
	b.ReportMetric(perByte(user+sys), "cpu-ns/B")
	b.ReportMetric(perByte(sys), "sys-ns/B")
}

func BenchmarkWritePath(b *testing.B) {
	// What a download does: its read-ahead reads the body into bufpool's chunks and hands each
	// to the ingest whole (Body.WriteTo), then Commit makes the blob durable.
	b.Run("ingest", func(b *testing.B) {
		s := openStore(b)
		measureWrites(b, func(int) {
			w, err := s.NewWriter(ctx)
			if err != nil {
				b.Fatal(err)
			}
			src := newBlockSource(writePathSize)
			buf := bufpool.Get(ChunkSize)
			for {
				n, err := io.ReadFull(src, *buf)
				if n > 0 {
					if buf, err = w.WriteBuffer(buf, n); err != nil {
						b.Fatal(err)
					}
				}
				if err != nil {
					break
				}
			}
			bufpool.Put(buf)
			d, err := w.Commit(ctx, writePathSize, "")
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			os.Remove(s.Path(d))
			b.StartTimer()
		})
	})
	// What a split download does: four connections write at offsets, and the hasher reads the
	// bytes back in order.
	b.Run("ingest-parts", func(b *testing.B) {
		s := openStore(b)
		measureWrites(b, func(int) {
			w, err := s.NewWriter(ctx)
			if err != nil {
				b.Fatal(err)
			}
			p, err := w.Parts(writePathSize, false)
			if err != nil {
				b.Fatal(err)
			}
			const conns, piece = 4, 16 << 20
			var wg sync.WaitGroup
			next := make(chan int64, writePathSize/piece)
			for off := int64(0); off < writePathSize; off += piece {
				next <- off
			}
			close(next)
			for range conns {
				wg.Add(1)
				go func() {
					defer wg.Done()
					buf := bufpool.Get(1 << 20)
					defer bufpool.Put(buf)
					src := newBlockSource(writePathSize)
					for off := range next {
						for pos := off; pos < off+piece; pos += int64(len(*buf)) {
							io.ReadFull(src, *buf)
							if _, err := p.WriteAt(*buf, pos); err != nil {
								b.Error(err)
								return
							}
						}
					}
				}()
			}
			wg.Wait()
			if err := p.Wait(ctx); err != nil {
				b.Fatal(err)
			}
			d, err := w.Commit(ctx, writePathSize, "")
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			os.Remove(s.Path(d))
			b.StartTimer()
		})
	})
	// The peer: what `crane blob > file` does, io.Copy (32 KiB at a time) through a sha256 tee
	// into a file, with no fsync; the same made durable; and the same in 1 MiB writes, which
	// shows what the size of a write costs in the kernel (atomicfile.WriteChunk).
	for _, c := range []struct {
		name    string
		durable bool
		buf     int
	}{{"plain-copy", false, 32 << 10}, {"plain-copy-fsync", true, 32 << 10}, {"plain-copy-1MiB-writes", false, 1 << 20}} {
		b.Run(c.name, func(b *testing.B) {
			dir := b.TempDir()
			buf := make([]byte, c.buf)
			measureWrites(b, func(int) {
				f, err := os.Create(filepath.Join(dir, "plain"))
				if err != nil {
					b.Fatal(err)
				}
				h := sha256.New()
				// The struct hides f's ReadFrom, so that the buffer sets the size of each write.
				if _, err := io.CopyBuffer(struct{ io.Writer }{f}, io.TeeReader(newBlockSource(writePathSize), h), buf); err != nil {
					b.Fatal(err)
				}
				if c.durable {
					if err := f.Sync(); err != nil {
						b.Fatal(err)
					}
				}
				f.Close()
				b.StopTimer()
				os.Remove(f.Name())
				b.StartTimer()
			})
		})
	}
}
