package artifact

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
	"testing"

	"github.com/klauspost/compress/zip"
	"github.com/klauspost/compress/zstd"
)

func FuzzRead(f *testing.F) {
	f.Add(buildZip(f, manifestEntry(), entry{name: "capsule.wasm", data: coreWasm}))
	f.Add(buildZip(f, manifestEntry(), entry{name: "a.wasm", data: componentWasm}, entry{name: "../b", data: nil}))
	f.Add(buildZip(f, entry{name: "murmur.yaml", data: []byte("name: [x\n")}))
	f.Add([]byte("PK\x05\x06\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"))
	f.Add([]byte{})
	// The same with zstd payloads, so that the fuzzer starts from method 93 too.
	f.Add(zstdZip(f, zstdOf(f, coreWasm), coreWasm, -1, -1))
	f.Add(zstdZip(f, zstdOf(f, bigWasm(true)[:20000]), bigWasm(true)[:20000], -1, -1))
	f.Add(zstdZip(f, frameSpec{window: windowLog(20), content: -1}.frame(coreWasm), coreWasm, -1, -1))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := Read(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			if a != nil {
				t.Fatal("Read returned an archive with an error")
			}
			return
		}
		if a.Manifest.Name == "" || a.Manifest.Version == "" || a.PayloadName == "" {
			t.Fatalf("accepted an archive without name, version or payload: %+v", a)
		}
		rc, err := a.OpenPayload()
		if err != nil {
			return
		}
		if n, _ := io.Copy(io.Discard, rc); n > a.PayloadSize {
			t.Fatalf("read %d bytes of a payload that records %d", n, a.PayloadSize)
		}
		rc.Close()
		a.CheckStream(bytes.NewReader(data))
	})
}

// zstdSeeds are zstd data for the fuzzer to start from: what encoders write, and the frames a
// hostile archive would hold.
func zstdSeeds(f *testing.F) [][]byte {
	wasm := bigWasm(true)[:50000]
	skippable := binary.LittleEndian.AppendUint32(nil, zstdSkippable)
	skippable = binary.LittleEndian.AppendUint32(skippable, 3)
	skippable = append(skippable, "abc"...)
	good := zstdOf(f, wasm)
	flipped := append([]byte(nil), good...)
	flipped[len(flipped)/3] ^= 0x40
	rle := uint32(1 | 1<<1 | (128<<10)<<3) // the last block, RLE, 128 KiB
	return [][]byte{
		good,
		zstdOf(f, []byte("x")),
		zstdOf(f, wasm, zstd.WithEncoderLevel(zstd.SpeedBestCompression), zstd.WithEncoderCRC(false)),
		zstdStreamed(f, wasm),
		append(zstdOf(f, wasm[:100]), zstdOf(f, wasm[100:])...),
		append(skippable, zstdOf(f, wasm[:1000])...),
		skippable,
		good[:len(good)/2],
		flipped,
		frameSpec{window: windowLog(20), content: -1}.frame(wasm),
		frameSpec{single: true, content: 100}.frame(wasm[:100]),
		frameSpec{window: windowLog(20), content: 10}.frame(wasm[:1000]),
		frameSpec{window: windowLog(31), content: -1}.frame(nil),
		frameSpec{window: windowLog(20), content: -1, dictID: 1}.frame(wasm[:10]),
		// RLE blocks: 4 bytes that decode to a whole block, the zstd way to a bomb.
		append(frameSpec{window: windowLog(20), content: -1}.frame(nil)[:6], byte(rle), byte(rle>>8), byte(rle>>16), 'A'),
		nil,
	}
}

// FuzzZstd decodes any bytes as a zstd entry's data, as CheckStream and the stream stage do
// (reading on into what follows the entry) and as the zip's reader does (within the entry's
// recorded size). It never panics and never produces more than the entry may hold; what it
// decodes is what the reference decoding of the bytes it took gives; and the two ways of reading
// an artifact agree on whether its payload is good.
func FuzzZstd(f *testing.F) {
	for _, s := range zstdSeeds(f) {
		f.Add(s, uint32(60000))
		f.Add(s, uint32(100))
		f.Add(s, uint32(60001))
		f.Add(s, uint32(0))
	}
	const trailer = "PK\x07\x08 the data descriptor, then the next entry"
	ref, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(8<<20))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte, declared uint32) {
		limit := int64(declared % (1 << 20))

		// As a stream: the reader takes what it decodes from, and no more.
		cr := &countingReader{r: bytes.NewReader(append(append([]byte(nil), body...), trailer...))}
		br, release := NewStreamReader(cr)
		defer release()
		dec := NewDecompressor(MethodZstd, br, limit)
		var out bytes.Buffer
		n, err := io.Copy(&ceilingWriter{w: &out, left: limit}, dec)
		dec.Close()
		if n > limit || int64(out.Len()) > limit {
			t.Fatalf("decoded %d bytes with a limit of %d", n, limit)
		}
		if err == nil {
			taken := cr.n - int64(br.Buffered())
			input := append(append([]byte(nil), body...), trailer...)[:taken]
			want, rerr := ref.DecodeAll(input, nil)
			if rerr != nil || !bytes.Equal(want, out.Bytes()) {
				t.Fatalf("decoded %d bytes from the first %d; the reference decodes %d from them (%v)", out.Len(), taken, len(want), rerr)
			}
		}

		// In an artifact, both ways; half the time with the size and CRC-32 of what the stream
		// decoded, so that good payloads are read too.
		size, crc := uint64(limit), uint32(declared)
		if err == nil && declared&1 == 0 {
			size, crc = uint64(out.Len()), crc32.ChecksumIEEE(out.Bytes())
		}
		wasm := append(append([]byte(nil), coreWasm...), body...)
		z := buildZip(t, manifestEntry(), entry{fh: &zip.FileHeader{Name: "capsule.wasm", Method: MethodZstd, CRC32: crc,
			UncompressedSize64: size, CompressedSize64: uint64(len(body))}, data: body, raw: true},
			entry{name: "docs/after", data: wasm})
		a, err := read(z)
		if err != nil {
			return
		}
		got, opened, streamed := readBoth(t, z)
		if int64(len(got)) > a.PayloadSize {
			t.Fatalf("read %d bytes of a payload that records %d", len(got), a.PayloadSize)
		}
		if (opened == nil) != (streamed == nil) {
			t.Fatalf("the zip's reader says %v, the stream %v", opened, streamed)
		}
	})
}
