package sandbox

import "encoding/binary"

// Custom sections and memory. To give a guest's crash its source lines, wazero copies every
// custom section but "name" onto the heap while it decodes a module, DWARF or not. A payload
// padded with a custom section of hundreds of MiB, which compresses to nothing, would so cost
// its size in memory at each compile and run, mapped from a file or not. Past
// maxCustomSections, a module is decoded without its debug info: the sections are skipped, and
// a crash is reported by function, not source line. The choice follows from the module's bytes
// alone, so Precompile and Run make the same one, and compile the same code.

// maxCustomSections is the most custom-section data a module may have for wazero to keep its
// debug info: a Go guest built with DWARF carries a few MiB.
const maxCustomSections = 64 << 20

// keepsDebugInfo reports whether wasm's custom sections, "name" aside, are small enough for
// wazero to copy; false past maxCustomSections. A module too malformed to walk reports true:
// the decoder refuses it with its own words.
func keepsDebugInfo(wasm []byte) bool {
	var total uint64
	for p := wasm[min(len(wasm), 8):]; len(p) > 0; {
		id := p[0]
		size, n := binary.Uvarint(p[1:])
		if n <= 0 || size > uint64(len(p)-1-n) {
			return true
		}
		body := p[1+n : 1+n+int(size)]
		p = p[1+n+int(size):]
		if id != 0 {
			continue
		}
		nameLen, m := binary.Uvarint(body)
		if m <= 0 || nameLen > uint64(len(body)-m) {
			return true
		}
		if string(body[m:m+int(nameLen)]) != "name" {
			total += size
		}
	}
	return total <= maxCustomSections
}
