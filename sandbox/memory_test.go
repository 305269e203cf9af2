//go:build unix

package sandbox

import (
	"strings"
	"testing"
	"unsafe"
)

// TestReservedMemoryGrowsInPlace: growing never moves the memory (so nothing is copied), the
// cap is the reservation's end, and freed memory reads as zeros instead of faulting (wazero may
// still read it after the guest exits).
func TestReservedMemoryGrowsInPlace(t *testing.T) {
	t.Parallel()
	a := &reservingAllocator{}
	defer a.release()
	m := a.Allocate(wasmPage, 1<<30)
	if _, ok := m.(*reservedMemory); !ok {
		t.Fatalf("Allocate gave a %T, want the reservation", m)
	}
	small := m.Reallocate(wasmPage)
	if len(small) != wasmPage {
		t.Fatalf("len %d", len(small))
	}
	small[0], small[wasmPage-1] = 1, 2
	big := m.Reallocate(256 << 20)
	if len(big) != 256<<20 || cap(big) != len(big) {
		t.Fatalf("len %d cap %d, want both 256 MiB", len(big), cap(big))
	}
	if unsafe.SliceData(big) != unsafe.SliceData(small) {
		t.Fatal("growing moved the memory")
	}
	if big[0] != 1 || big[wasmPage-1] != 2 {
		t.Fatal("growing lost the contents")
	}
	big[len(big)-1] = 3 // the new pages are writable
	if full := m.Reallocate(1 << 30); len(full) != 1<<30 {
		t.Fatalf("growing to the cap: len %d", len(full))
	}
	if over := m.Reallocate(1<<30 + wasmPage); over != nil {
		t.Fatal("grew past the cap")
	}
	m.Free()
	if big[0] != 0 {
		t.Error("freed memory still holds its contents")
	}
}

// TestGuestGrowsToItsCap: a guest grows well past its start under the reservation, and a guest
// that wants more than its cap fails as its own failure, not mur's.
func TestGuestGrowsToItsCap(t *testing.T) {
	t.Parallel()
	r := sharedRunner(t)
	guest := goGuest(t)
	res := run(t, r, guest, Config{Args: []string{"grow", "200"}, MemoryMiB: 256})
	if res.err != nil || res.code != 0 || !strings.HasPrefix(res.stdout, "grew 200 MiB") {
		t.Fatalf("grow 200 under 256 MiB: %d, %v, %q %q", res.code, res.err, res.stdout, lastLine(res.stderr))
	}
	res = run(t, r, guest, Config{Args: []string{"grow", "300"}, MemoryMiB: 256})
	if res.code == 0 || strings.HasPrefix(res.stdout, "grew") {
		t.Fatalf("grow 300 under 256 MiB succeeded: %q", res.stdout)
	}
	if s := ExitStatus(res.code, res.err); s >= 124 && s <= 126 {
		t.Errorf("status %d is a runner class, want the guest's own failure", s)
	}
}
