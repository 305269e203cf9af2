package stage

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/internal/artifact"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
)

// withSlots runs the test with n decompression slots, and hook called each time a stream takes
// one.
func withSlots(t *testing.T, n int, hook func(busy int32)) {
	t.Helper()
	old := inflateSlots
	inflateSlots = make(chan struct{}, n)
	inflateHook.Store(&hook)
	t.Cleanup(func() {
		inflateHook.Store(nil)
		inflateSlots = old
	})
}

// waitFor polls cond for up to ten seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting until %s", what)
		}
	}
}

// No more streams decompress at once than there are slots, deflate and zstd alike: with six
// payloads downloading together and two slots, two streams decompress and four wait, and all
// six are checked in the end.
func TestStreamDecompressionIsBounded(t *testing.T) {
	const slots = 2
	var peak atomic.Int32
	gate := make(chan struct{})
	open := sync.OnceFunc(func() { close(gate) })
	t.Cleanup(open) // a failure must not leave streams holding slots for the tests after it
	withSlots(t, slots, func(busy int32) {
		for p := peak.Load(); busy > p && !peak.CompareAndSwap(p, busy); p = peak.Load() {
		}
		<-gate // the first takers hold their slots until the test has looked
	})
	var blobs [][]byte
	for i := range 6 {
		spec := artifacttest.Spec{Name: "tool", Version: "1.0.0", Wasm: artifacttest.Module(512<<10, uint64(i))}
		if i%2 == 1 {
			spec.Compression = artifact.Zstd
		}
		blobs = append(blobs, spec.Zip())
	}
	streams := make([]*Stream, len(blobs))
	var fed sync.WaitGroup
	for i, blob := range blobs {
		streams[i] = NewStream(nil, streamName, digest.FromBytes(blob), nil)
		fed.Go(func() { feed(streams[i], blob, 0) })
	}
	waitFor(t, "two streams decompress", func() bool { return inflating.Load() >= slots })
	time.Sleep(100 * time.Millisecond) // time for a third to get in, if it could
	if n := inflating.Load(); n != slots {
		t.Fatalf("%d streams decompress at once with %d slots", n, slots)
	}
	open()
	fed.Wait()
	for i, blob := range blobs {
		if !streams[i].Verified(readArchive(t, blob), int64(len(blob))) {
			t.Errorf("stream %d did not vouch for its payload", i)
		}
	}
	if p := peak.Load(); p != slots {
		t.Errorf("at most %d streams decompressed at once; want %d, the slots", p, slots)
	}
	if n := inflating.Load(); n != 0 || len(inflateSlots) != 0 {
		t.Errorf("%d streams (%d slots) still hold a slot after every stream ended", n, len(inflateSlots))
	}
}

// A stream waiting for its download gives its slot back: with one slot, a stream that has half
// its payload does not keep another from being checked to its end.
func TestStreamGivesItsSlotBackWhileWaiting(t *testing.T) {
	var takes atomic.Int32
	withSlots(t, 1, func(int32) { takes.Add(1) })
	slow := artifacttest.Spec{Name: "tool", Version: "1.0.0", Wasm: artifacttest.Module(2<<20, 1), Compression: artifact.Zstd}.Zip()
	fast := artifacttest.Zip("tool", "1.0.0", artifacttest.Module(1<<20, 2))

	a := NewStream(nil, streamName, digest.FromBytes(slow), nil)
	a.Write(slow[:len(slow)/2])
	waitFor(t, "the slow stream took the slot and gave it back", func() bool { return takes.Load() > 0 && inflating.Load() == 0 })

	b := NewStream(nil, streamName, digest.FromBytes(fast), nil)
	feed(b, fast, 0)
	done := make(chan bool)
	go func() { done <- b.Verified(readArchive(t, fast), int64(len(fast))) }()
	select {
	case ok := <-done:
		if !ok {
			t.Fatal("the second stream did not vouch for its payload")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second stream waits for the slot a stalled download holds")
	}
	a.Write(slow[len(slow)/2:])
	if !a.Verified(readArchive(t, slow), int64(len(slow))) {
		t.Fatal("the slow stream did not vouch for its payload once it was all in")
	}
	if inflating.Load() != 0 {
		t.Fatalf("%d streams still hold a slot", inflating.Load())
	}
}
