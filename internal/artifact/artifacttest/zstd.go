package artifacttest

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/murmur-nexus/mur/internal/artifact"
)

// ZstdRefused packs s with zstd payloads that some zstd decoder may well read but that mur
// refuses wherever it meets them (a pull, cache import, cache verify), keyed by what is wrong:
// a frame asking for a 2 GiB window, one single-segment frame of 400 MiB (whose window is its
// content), and a skippable frame whose length runs past the entry's data, first or after the
// payload's frame.
func (s Spec) ZstdRefused() map[string][]byte {
	wasm := s.wasm()
	crc := crc32.ChecksumIEEE(wasm)
	good := Compress(artifact.MethodZstd, wasm)
	skippable := func(length uint32) []byte {
		b := binary.LittleEndian.AppendUint32(nil, 0x184d2a50)
		return binary.LittleEndian.AppendUint32(b, length)
	}
	return map[string][]byte{
		"a 2 GiB window":                   s.Raw(artifact.MethodZstd, rawFrame([]byte{(31 - 10) << 3}, wasm), crc, uint64(len(wasm))),
		"one 400 MiB segment":              s.Raw(artifact.MethodZstd, rawFrame(binary.LittleEndian.AppendUint32(nil, 400<<20), wasm), crc, 400<<20),
		"a skippable frame past the entry": s.Raw(artifact.MethodZstd, append(skippable(1<<20), good...), crc, uint64(len(wasm))),
		"a skippable frame after the data": s.Raw(artifact.MethodZstd, append(append([]byte(nil), good...), skippable(64)...), crc, uint64(len(wasm))),
	}
}

// rawFrame is a zstd frame of data in raw blocks, after a header whose descriptor byte follows
// from head: one byte is a window descriptor (no content size), four a single segment's
// content size.
func rawFrame(head, data []byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 0xfd2fb528)
	if len(head) == 4 {
		b = append(b, 0x20|2<<6) // single segment, a 4-byte content size
	} else {
		b = append(b, 0)
	}
	b = append(b, head...)
	for first := true; first || len(data) > 0; first = false {
		n := min(len(data), 128<<10)
		hdr := uint32(n) << 3 // a raw block
		if n == len(data) {
			hdr |= 1 // the last one
		}
		b = append(b, byte(hdr), byte(hdr>>8), byte(hdr>>16))
		b = append(b, data[:n]...)
		data = data[n:]
	}
	return b
}
