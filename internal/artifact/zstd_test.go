package artifact

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/klauspost/compress/zip"
	"github.com/klauspost/compress/zstd"

	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
)

// zstdOf is b as one zstd frame, with its content size and checksum, as `mur pack` writes it.
func zstdOf(t testing.TB, b []byte, opts ...zstd.EOption) []byte {
	t.Helper()
	var c bytes.Buffer
	w, err := zstd.NewWriter(nil, append([]zstd.EOption{zstd.WithEncoderConcurrency(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	w.ResetContentSize(&c, int64(len(b)))
	w.Write(b)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return c.Bytes()
}

// zstdStreamed is b as one zstd frame that does not record its content size: what an encoder
// writing to a pipe produces.
func zstdStreamed(t testing.TB, b []byte) []byte {
	t.Helper()
	var c bytes.Buffer
	w, _ := zstd.NewWriter(&c, zstd.WithEncoderConcurrency(1))
	w.Write(b)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return c.Bytes()
}

// frameSpec is a zstd frame written by hand, of raw (uncompressed) blocks, so that a test can
// set what no encoder writes: a huge window, a dictionary, a lying content size.
type frameSpec struct {
	window  byte  // the window descriptor; 0 with single
	single  bool  // single segment: the window is the content size
	content int64 // the content size to record; -1 records none
	dictID  uint32
	fhd     byte // extra bits of the frame header descriptor (the reserved bit, say)
}

func (f frameSpec) frame(data []byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, zstdMagic)
	fhd := f.fhd
	if f.single {
		fhd |= 0x20
	}
	if f.dictID != 0 {
		fhd |= 3
	}
	if f.content >= 0 {
		fhd |= 3 << 6 // an 8-byte content size
	}
	b = append(b, fhd)
	if !f.single {
		b = append(b, f.window)
	}
	if f.dictID != 0 {
		b = binary.LittleEndian.AppendUint32(b, f.dictID)
	}
	if f.content >= 0 {
		b = binary.LittleEndian.AppendUint64(b, uint64(f.content))
	}
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

// windowLog is the window descriptor of a 1<<log-byte window.
func windowLog(log int) byte { return byte(log-10) << 3 }

// zstdZip is a packed artifact whose payload is the zstd data body, recorded as wasm's size and
// CRC-32 unless size or crc say otherwise (-1 keeps them).
func zstdZip(t testing.TB, body, wasm []byte, size int64, crc int64) []byte {
	t.Helper()
	if size < 0 {
		size = int64(len(wasm))
	}
	if crc < 0 {
		crc = int64(crc32.ChecksumIEEE(wasm))
	}
	return buildZip(t, manifestEntry(), entry{fh: &zip.FileHeader{Name: "capsule.wasm", Method: MethodZstd, CRC32: uint32(crc),
		UncompressedSize64: uint64(size), CompressedSize64: uint64(len(body))}, data: body, raw: true})
}

// readBoth reads z's payload both ways mur does: through the zip's reader (OpenPayload, as
// `mur run` and staging from a blob do, with the size and CRC-32 held to the zip's record as
// CheckPayload holds them), and as one stream from the file's first byte (CheckStream, as
// a pull or a cache import does). It returns the payload and each way's error.
func readBoth(t *testing.T, z []byte) (payload []byte, opened, streamed error) {
	t.Helper()
	a, err := read(z)
	if err != nil {
		return nil, err, err
	}
	payload, opened = a.ReadPayload()
	if opened == nil && (int64(len(payload)) != a.PayloadSize || crc32.ChecksumIEEE(payload) != a.PayloadCRC32()) {
		opened = errors.New("the payload read is not the one the zip records")
	}
	return payload, opened, a.CheckStream(bytes.NewReader(z))
}

// Zstd payloads as other encoders write them read back, both ways: one frame with or without
// its content size or checksum, several frames, a skippable frame, raw blocks in a single
// segment, an empty payload.
func TestZstdGood(t *testing.T) {
	t.Parallel()
	wasm := bigWasm(true)
	half := len(wasm) / 2
	skippable := binary.LittleEndian.AppendUint32(nil, zstdSkippable|7)
	skippable = binary.LittleEndian.AppendUint32(skippable, 5)
	skippable = append(skippable, "hello"...)
	for name, c := range map[string]struct{ body, want []byte }{
		"one frame":                 {zstdOf(t, wasm), wasm},
		"best level":                {zstdOf(t, wasm, zstd.WithEncoderLevel(zstd.SpeedBestCompression)), wasm},
		"no content size":           {zstdStreamed(t, wasm), wasm},
		"no checksum":               {zstdOf(t, wasm, zstd.WithEncoderCRC(false)), wasm},
		"two frames":                {append(zstdOf(t, wasm[:half]), zstdOf(t, wasm[half:])...), wasm},
		"a skippable frame first":   {append(skippable, zstdOf(t, wasm)...), wasm},
		"a skippable frame between": {append(append(zstdOf(t, wasm[:half]), skippable...), zstdOf(t, wasm[half:])...), wasm},
		"raw blocks, one segment":   {frameSpec{single: true, content: int64(len(coreWasm))}.frame(coreWasm), coreWasm},
		"raw blocks, 8 MiB window":  {frameSpec{window: windowLog(23), content: -1}.frame(wasm), wasm},
		"empty":                     {nil, nil},
		"only a skippable frame":    {skippable, nil},
	} {
		t.Run(name, func(t *testing.T) {
			// Read refuses a payload that is not wasm only when it packs: an empty one reads.
			z := zstdZip(t, c.body, c.want, -1, -1)
			got, opened, streamed := readBoth(t, z)
			if opened != nil || streamed != nil || !bytes.Equal(got, c.want) {
				t.Fatalf("read %d bytes (%v), streamed: %v; want the %d-byte payload", len(got), opened, streamed, len(c.want))
			}
		})
	}
}

// Damaged or hostile zstd payloads are refused both ways with invalid-artifact, naming the
// payload and saying what to do; never a panic, never more output than the zip records.
func TestZstdRefusals(t *testing.T) {
	t.Parallel()
	wasm := bigWasm(true)
	good := zstdOf(t, wasm)
	flipped := append([]byte(nil), good...)
	flipped[len(flipped)/2] ^= 0x55
	cut := good[:len(good)/2]
	unknown := zstdStreamed(t, wasm)
	for name, c := range map[string]struct {
		z        []byte
		mentions []string // what both ways' errors say
	}{
		"a damaged frame":              {zstdZip(t, flipped, wasm, -1, -1), []string{"damaged"}},
		"a cut frame":                  {zstdZip(t, cut, wasm, -1, -1), []string{}},
		"not zstd at all":              {zstdZip(t, []byte("PK\x03\x04 certainly not zstd"), wasm, -1, -1), []string{"not a zstd frame"}},
		"a wrong CRC-32":               {zstdZip(t, good, wasm, -1, int64(crc32.ChecksumIEEE(wasm)^1)), []string{"checksum"}},
		"a frame larger than declared": {zstdZip(t, good, wasm, int64(len(wasm)-100), -1), []string{}},
		"content larger than declared, size unrecorded": {zstdZip(t, unknown, wasm, int64(len(wasm)-100), -1), []string{}},
		"content shorter than declared":                 {zstdZip(t, good, wasm, int64(len(wasm)+1), -1), []string{}},
		"a frame lying about its content size":          {zstdZip(t, frameSpec{window: windowLog(20), content: 10}.frame(wasm), wasm, -1, -1), []string{"damaged"}},
		"a 16 MiB window":                               {zstdZip(t, frameSpec{window: windowLog(24), content: -1}.frame(wasm), wasm, -1, -1), []string{"window", "mur pack --compression zstd"}},
		"a 2 GiB window, no data":                       {zstdZip(t, frameSpec{window: windowLog(31), content: -1}.frame(nil), nil, -1, -1), []string{"window", "mur pack --compression zstd"}},
		"one 400 MB segment":                            {zstdZip(t, frameSpec{single: true, content: 400 << 20}.frame(coreWasm), coreWasm, 400<<20, -1), []string{"window", "mur pack --compression zstd"}},
		"a dictionary":                                  {zstdZip(t, frameSpec{window: windowLog(20), content: -1, dictID: 7}.frame(wasm), wasm, -1, -1), []string{"dictionary 7"}},
		"the reserved header bit":                       {zstdZip(t, frameSpec{window: windowLog(20), content: -1, fhd: 0x08}.frame(wasm), wasm, -1, -1), []string{"reserved"}},
		"a reserved block type":                         {zstdZip(t, append(frameSpec{window: windowLog(20), content: -1}.frame(nil)[:6], 0x07, 0, 0), nil, -1, -1), []string{"reserved"}},
	} {
		t.Run(name, func(t *testing.T) {
			got, opened, streamed := readBoth(t, c.z)
			if opened == nil || streamed == nil {
				t.Fatalf("accepted (%d bytes): opened %v, streamed %v", len(got), opened, streamed)
			}
			a, err := read(c.z)
			if err != nil {
				// Read decodes the payload's first bytes; a frame it can't start is refused there.
				errtest.WantToken(t, err, errs.InvalidArtifact, append([]string{`payload "capsule.wasm"`}, c.mentions...)...)
				return
			}
			if int64(len(got)) > a.PayloadSize {
				t.Errorf("read %d bytes of a payload that records %d", len(got), a.PayloadSize)
			}
			if !errors.Is(opened, errs.InvalidArtifact) {
				t.Fatalf("opened: %v", opened)
			}
			errtest.WantToken(t, opened, errs.InvalidArtifact, append([]string{`payload "capsule.wasm"`}, c.mentions...)...)
			errtest.WantToken(t, streamed, errs.InvalidArtifact, append([]string{`payload "capsule.wasm"`, "report it"}, c.mentions...)...)
		})
	}
}

// The same frames after a good one, so that Read (which decodes the payload's first bytes) takes
// the artifact and the refusal comes from reading the payload, each way.
func TestZstdRefusalsInALaterFrame(t *testing.T) {
	t.Parallel()
	wasm := bigWasm(true)
	head, rest := wasm[:4096], wasm[4096:]
	first := zstdOf(t, head)
	for name, c := range map[string]struct {
		second   []byte
		size     int64
		mentions []string
	}{
		"lying about its content size": {frameSpec{window: windowLog(20), content: 10}.frame(rest), -1, []string{"damaged"}},
		"a 16 MiB window":              {frameSpec{window: windowLog(24), content: -1}.frame(rest), -1, []string{"window", "mur pack --compression zstd"}},
		"one 9 MiB segment":            {frameSpec{single: true, content: 9 << 20}.frame(rest), 9 << 20, []string{"window", "mur pack --compression zstd"}},
		"a dictionary":                 {frameSpec{window: windowLog(20), content: -1, dictID: 7}.frame(rest), -1, []string{"dictionary 7"}},
		"the reserved header bit":      {frameSpec{window: windowLog(20), content: -1, fhd: 0x08}.frame(rest), -1, []string{"reserved"}},
		"a reserved block type":        {append(frameSpec{window: windowLog(20), content: -1}.frame(nil)[:6], 0x07, 0, 0), -1, []string{"reserved"}},
		"cut short":                    {zstdOf(t, rest)[:20], -1, []string{"damaged"}},
	} {
		t.Run(name, func(t *testing.T) {
			z := zstdZip(t, append(append([]byte(nil), first...), c.second...), wasm, c.size, -1)
			a, err := read(z)
			if err != nil {
				t.Fatalf("Read refused the artifact: %v", err)
			}
			got, opened, streamed := readBoth(t, z)
			if int64(len(got)) > a.PayloadSize {
				t.Errorf("read %d bytes of a payload that records %d", len(got), a.PayloadSize)
			}
			errtest.WantToken(t, opened, errs.InvalidArtifact, append([]string{`payload "capsule.wasm"`}, c.mentions...)...)
			errtest.WantToken(t, streamed, errs.InvalidArtifact, append([]string{`payload "capsule.wasm"`}, c.mentions...)...)
		})
	}
}

// A frame that asks for more memory than mur decodes with is refused at its header: nothing
// near its window is allocated.
func TestZstdWindowRefusedBeforeAllocating(t *testing.T) {
	for name, body := range map[string][]byte{
		"a 1 GiB window":     frameSpec{window: windowLog(30), content: -1}.frame(coreWasm),
		"one 400 MB segment": frameSpec{single: true, content: 400 << 20}.frame(coreWasm),
	} {
		t.Run(name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			br, release := NewStreamReader(bytes.NewReader(body))
			defer release()
			dec := NewDecompressor(MethodZstd, br, DefaultMaxDecompressed)
			_, err := io.Copy(io.Discard, dec)
			dec.Close()
			runtime.ReadMemStats(&after)
			var unsupported *ZstdUnsupported
			if !errors.As(err, &unsupported) || !strings.Contains(err.Error(), "window") {
				t.Fatalf("decoded with %v; want the window refused", err)
			}
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 4<<20 {
				t.Errorf("refusing the frame allocated %d bytes", grew)
			}
		})
	}
}

// The zstd reader stops where its frames end: the bytes after them (a data descriptor, the next
// entry) are still the reader's, which is how CheckStream and the stream stage find the next
// entry. Decoders from the pool decode each entry from scratch.
func TestZstdStopsAtTheEndAndStartsAfresh(t *testing.T) {
	t.Parallel()
	// Not an empty one: an encoder writes no frame at all for it, so only the zip's record of the
	// entry's compressed size (0) can tell where it ends.
	payloads := [][]byte{bigWasm(true), []byte("short"), bytes.Repeat([]byte("z"), 70000)}
	for round := range 3 {
		for _, p := range payloads {
			body := zstdOf(t, p)
			if round == 1 {
				body = zstdStreamed(t, p)
			}
			br, release := NewStreamReader(bytes.NewReader(append(body, "PK\x07\x08TRAILER"...)))
			dec := NewDecompressor(MethodZstd, br, int64(len(p)))
			got, err := io.ReadAll(dec)
			if err != nil || !bytes.Equal(got, p) {
				t.Fatalf("round %d: decoded %d bytes (%v), want the %d of the payload", round, len(got), err, len(p))
			}
			dec.Close()
			dec.Close() // a second Close must not give the decoder back twice
			if rest, _ := io.ReadAll(br); string(rest) != "PK\x07\x08TRAILER" {
				t.Fatalf("round %d: after the frames the reader holds %q, want the trailer", round, rest)
			}
			release()
		}
	}
}

// A frame that says it holds more than the entry may is refused at its header.
func TestZstdFrameLargerThanDeclared(t *testing.T) {
	t.Parallel()
	wasm := bigWasm(true)
	br, release := NewStreamReader(bytes.NewReader(zstdOf(t, wasm)))
	defer release()
	dec := NewDecompressor(MethodZstd, br, int64(len(wasm)-1))
	defer dec.Close()
	n, err := io.Copy(io.Discard, dec)
	if err == nil || n != 0 || !strings.Contains(err.Error(), "declare") {
		t.Fatalf("decoded %d bytes, %v; want nothing and the frame's size refused", n, err)
	}
}

// Closing twice gives the decoder back once: two readers made afterwards never share one.
func TestZstdClosedTwiceIsPooledOnce(t *testing.T) {
	t.Parallel()
	body := zstdOf(t, []byte("x"))
	z := newZstdReader(bytes.NewReader(body), -1)
	io.ReadAll(z)
	z.Close()
	z.Close()
	a, b := newZstdReader(bytes.NewReader(nil), -1), newZstdReader(bytes.NewReader(nil), -1)
	if a.dec == b.dec {
		t.Fatal("two live readers share one decoder")
	}
	a.Close()
	b.Close()
}

// Pack with zstd: reproducible, the payload under method 93 and murmur.yaml still deflated, and
// the frame records the payload's size and a window no larger than it needs.
func TestPackZstd(t *testing.T) {
	t.Parallel()
	payload := bigWasm(true)
	files := map[string][]byte{"murmur.yaml": goodManifest, "capsule.wasm": payload}
	pk := func(dir string) []byte {
		var buf bytes.Buffer
		if _, err := PackWith(dir, &buf, PackOptions{Compression: Zstd}); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	first := pk(writeDir(t, files))
	if second := pk(writeDir(t, files)); !bytes.Equal(first, second) {
		t.Fatal("packing twice with zstd gave different bytes")
	}
	deflated, _, _ := pack(t, writeDir(t, files))
	if bytes.Equal(first, deflated) {
		t.Fatal("--compression zstd packed what deflate packs")
	}
	zr, err := zip.NewReader(bytes.NewReader(first), int64(len(first)))
	if err != nil {
		t.Fatal(err)
	}
	if len(zr.File) != 2 || zr.File[0].Method != zip.Deflate || zr.File[1].Method != MethodZstd {
		t.Fatalf("entries %v; want murmur.yaml deflated, then the payload with zstd", zr.File)
	}
	raw, _ := zr.File[1].OpenRaw()
	var h zstd.Header
	head := make([]byte, zstd.HeaderMaxSize)
	io.ReadFull(raw, head)
	if err := h.Decode(head); err != nil || !h.HasFCS || h.FrameContentSize != uint64(len(payload)) || h.WindowSize > ZstdMaxWindow {
		t.Fatalf("frame header %+v (%v); want the payload's size recorded and a window within %d", h, err, ZstdMaxWindow)
	}
	got, opened, streamed := readBoth(t, first)
	if opened != nil || streamed != nil || !bytes.Equal(got, payload) {
		t.Fatalf("read back %d bytes (%v, %v)", len(got), opened, streamed)
	}
	if _, err := ParseCompression("brotli"); !errors.Is(err, errs.Usage) || !strings.Contains(err.Error(), "deflate") {
		t.Errorf("ParseCompression(brotli) = %v", err)
	}
	var buf bytes.Buffer
	if _, err := PackWith(writeDir(t, files), &buf, PackOptions{Compression: "lzma"}); err == nil || buf.Len() != 0 {
		t.Errorf("PackWith lzma = %v, wrote %d bytes", err, buf.Len())
	}
}

// An entry of a method mur does not read is refused by name, wherever it is.
func TestCheckStreamUnknownMethod(t *testing.T) {
	t.Parallel()
	z := buildZip(t, manifestEntry(), entry{fh: &zip.FileHeader{Name: "docs/x.bz2", Method: 12, UncompressedSize64: 3, CompressedSize64: 3, CRC32: crc32.ChecksumIEEE([]byte("abc"))}, data: []byte("abc"), raw: true},
		entry{name: "capsule.wasm", data: coreWasm})
	errtest.WantToken(t, checkStream(t, z), errs.InvalidArtifact, `entry "docs/x.bz2"`, "method 12", "zstd")
	payload20 := buildZip(t, manifestEntry(), entry{fh: &zip.FileHeader{Name: "capsule.wasm", Method: 20, UncompressedSize64: 8, CompressedSize64: 8, CRC32: crc32.ChecksumIEEE(coreWasm[:8])}, data: coreWasm[:8], raw: true})
	_, err := read(payload20)
	errtest.WantToken(t, err, errs.InvalidArtifact, `payload "capsule.wasm"`, "method 20", "mur pack")
}
