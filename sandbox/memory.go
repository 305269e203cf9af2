package sandbox

import "sync"

// reservingAllocator backs each guest memory with one reservation of its whole cap, made
// inaccessible (PROT_NONE, MAP_NORESERVE: no RAM and no overcommit charge), and commits pages
// only as the guest grows into them. wazero's default grows a Go slice by appending, which copies
// the whole memory on every memory.grow and keeps the old copies until the collector runs: a
// guest that climbs to 1 GiB drove a run to about 4 GiB of RSS. Here the memory never moves, so
// nothing is copied, and host memory follows the pages the guest really touched.
//
// Use one per run and call release after the runtime is closed: wazero calls Free when the
// module closes (proc_exit, a timeout), but it keeps a slice of the memory after that, so Free
// only gives the pages back and the mapping goes with release.
type reservingAllocator struct {
	mu   sync.Mutex
	maps [][]byte
	peak uint64 // the most any memory of the run grew to, in bytes
}

// grew notes that a memory of the run now holds size bytes.
func (a *reservingAllocator) grew(size uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.peak = max(a.peak, size)
}

// Peak is the most any memory of the run grew to, in bytes: how close the guest came to its cap.
func (a *reservingAllocator) Peak() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.peak
}

// wasmPage is WebAssembly's page size; a reservation is never smaller.
const wasmPage = 1 << 16

// heapMemory is the fallback: a Go slice grown by appending, like wazero's own.
type heapMemory struct {
	buf  []byte
	max  uint64
	grew func(uint64)
}

func (h *heapMemory) Reallocate(size uint64) []byte {
	if size > h.max {
		return nil
	}
	if size > uint64(len(h.buf)) {
		h.buf = append(h.buf, make([]byte, size-uint64(len(h.buf)))...)
		h.grew(size)
	}
	return h.buf[:size]
}

func (h *heapMemory) Free() { h.buf = nil }
