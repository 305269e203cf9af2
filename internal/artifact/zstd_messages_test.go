package artifact

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"testing"

	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
)

// Each zstd refusal says what is wrong in its own words, each way mur reads a payload (through the
// zip's reader, and as one stream): a damaged frame is not worded as a refused window, nor a
// cut frame as a lying size. The numbers in them are the data's own.
func TestZstdRefusalWords(t *testing.T) {
	wasm := bigWasm(true)
	n := int64(len(wasm))
	good := zstdOf(t, wasm)
	head, rest := wasm[:4096], wasm[4096:]
	later := func(second []byte) []byte { return append(append([]byte(nil), zstdOf(t, head)...), second...) }
	skipAfter := binary.LittleEndian.AppendUint32(append([]byte(nil), good...), zstdSkippable)
	skipAfter = binary.LittleEndian.AppendUint32(skipAfter, 64)
	window := func(size int64) string {
		return fmt.Sprintf("its zstd data needs a %d-byte window, over the %d bytes mur decodes with", size, ZstdMaxWindow)
	}
	for name, c := range map[string]struct {
		z                []byte
		opened, streamed string
	}{
		"cut in a frame":      {zstdZip(t, good[:len(good)/2], wasm, -1, -1), "the zstd data ends in the middle of a frame", "the zstd data ends in the middle of a frame"},
		"frames declare more": {zstdZip(t, good, wasm, n-100, -1), fmt.Sprintf("decompresses past the %d bytes its zip records", n-100), fmt.Sprintf("its frames declare %d bytes of content, more than the %d of the entry", n, n-100)},
		"decodes past the record": {zstdZip(t, zstdStreamed(t, wasm), wasm, n-100, -1),
			fmt.Sprintf("decompresses past the %d bytes its zip records", n-100), fmt.Sprintf("decodes past the %d bytes its zip records", n-100)},
		"shorter than the record": {zstdZip(t, good, wasm, n+1, -1), "is damaged (unexpected EOF)", fmt.Sprintf("is %d bytes, but the zip records %d", n, n+1)},
		"too short for a frame":   {zstdZip(t, []byte{0x28, 0xb5}, wasm, -1, -1), "bad zstd data: 2 bytes, too short for a frame", "bad zstd data: 2 bytes, too short for a frame"},
		"not a frame": {zstdZip(t, []byte("PK\x03\x04 certainly not zstd"), wasm, -1, -1),
			"it starts with 04034b50, not a zstd frame's magic number fd2fb528", "it starts with 04034b50, not a zstd frame's magic number fd2fb528"},
		"a skippable frame past the entry": {zstdZip(t, skipAfter, wasm, -1, -1), "the zstd data ends in the middle of a frame",
			fmt.Sprintf("takes %d bytes of zstd stream, but the zip records %d", len(skipAfter)+64, len(skipAfter))},
		"the reserved header bit": {zstdZip(t, later(frameSpec{window: windowLog(20), content: -1, fhd: 0x08}.frame(rest)), wasm, -1, -1),
			"bad zstd data: a frame header with its reserved bit set", "bad zstd data: a frame header with its reserved bit set"},
		"the reserved block type": {zstdZip(t, later(append(frameSpec{window: windowLog(20), content: -1}.frame(nil)[:6], 0x07, 0, 0)), wasm, -1, -1),
			"bad zstd data: a block of the reserved type 3", "bad zstd data: a block of the reserved type 3"},
		"a 16 MiB window":   {zstdZip(t, later(frameSpec{window: windowLog(24), content: -1}.frame(rest)), wasm, -1, -1), window(16 << 20), window(16 << 20)},
		"one 9 MiB segment": {zstdZip(t, later(frameSpec{single: true, content: 9 << 20}.frame(rest)), wasm, 9<<20, -1), window(9 << 20), window(9 << 20)},
		"a dictionary":      {zstdZip(t, later(frameSpec{window: windowLog(20), content: -1, dictID: 7}.frame(rest)), wasm, -1, -1), "its zstd data needs dictionary 7, which a zip entry can't carry", "its zstd data needs dictionary 7, which a zip entry can't carry"},
		"a wrong checksum":  {zstdZip(t, good, wasm, -1, 7), "does not have the checksum crc32:00000007 its zip records", fmt.Sprintf("has checksum crc32:%08x, but the zip records crc32:00000007", crc32.ChecksumIEEE(wasm))},
	} {
		t.Run(name, func(t *testing.T) {
			_, opened, streamed := readBoth(t, c.z)
			errtest.WantToken(t, opened, errs.InvalidArtifact, `payload "capsule.wasm"`, c.opened)
			errtest.WantToken(t, streamed, errs.InvalidArtifact, `payload "capsule.wasm"`, c.streamed)
		})
	}
}

// Zstd data mur does not decode, though it may be valid, is worded as such, with what to do:
// pack it again with mur pack, whose settings stay within mur's limits.
func TestZstdUnsupportedSaysRepack(t *testing.T) {
	wasm := bigWasm(true)
	z := zstdZip(t, append(append([]byte(nil), zstdOf(t, wasm[:4096])...), frameSpec{window: windowLog(24), content: -1}.frame(wasm[4096:])...), wasm, -1, -1)
	_, opened, streamed := readBoth(t, z)
	for _, err := range []error{opened, streamed} {
		errtest.WantToken(t, err, errs.InvalidArtifact, "can't be read: its zstd data", RepackZstd)
	}
}

// A zstd reader read after Close says so, and never decodes with a decoder it gave back.
func TestZstdReaderAfterClose(t *testing.T) {
	br, release := NewStreamReader(bytes.NewReader(zstdOf(t, coreWasm)))
	defer release()
	dec := NewDecompressor(MethodZstd, br, int64(len(coreWasm)))
	dec.Close()
	if _, err := dec.Read(make([]byte, 8)); err == nil || err.Error() != "zstd reader used after Close" {
		t.Errorf("Read after Close: %v", err)
	}
	if _, err := io.Copy(io.Discard, dec); err == nil || err.Error() != "zstd reader used after Close" {
		t.Errorf("WriteTo after Close: %v", err)
	}
}
