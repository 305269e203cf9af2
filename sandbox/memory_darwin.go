package sandbox

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// discard gives b's pages back to the system; reading b afterwards sees zeros. macOS keeps the
// contents under MADV_DONTNEED, so fresh zero pages are mapped over b instead.
func discard(b []byte) {
	_, _ = unix.MmapPtr(-1, 0, unsafe.Pointer(unsafe.SliceData(b)), uintptr(len(b)), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_FIXED)
}
