package artifact

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/murmur-nexus/mur/sandbox/guesttest"
)

// BenchmarkDecode decompresses the same payload, a 2.6 MB Go guest, as `mur pack` packs it with
// deflate and with zstd: the decompressor alone (as the stream stage runs it), a zstd decoder
// made for the one payload instead of taken from the pool, and the whole payload read back
// through the zip (as `mur run` and staging from a blob read it, CRC-32 included).
//
//	go test -run '^$' -bench Decode -benchmem ./internal/artifact/
func BenchmarkDecode(b *testing.B) {
	wasm := guesttest.Build(b, "hello")
	dir := b.TempDir()
	writeFiles(b, dir, map[string][]byte{"murmur.yaml": goodManifest, "capsule.wasm": wasm})
	packed := map[Compression][]byte{}
	bodies := map[Compression][]byte{}
	for _, c := range []Compression{Deflate, Zstd} {
		var buf bytes.Buffer
		if _, err := PackWith(dir, &buf, PackOptions{Compression: c}); err != nil {
			b.Fatal(err)
		}
		packed[c] = buf.Bytes()
		a, err := read(buf.Bytes())
		if err != nil {
			b.Fatal(err)
		}
		off, _, csize, _ := a.PayloadEntry()
		bodies[c] = buf.Bytes()[off : off+csize]
		b.Logf("%s: %d bytes packed of %d", c, len(buf.Bytes()), len(wasm))
	}
	method := map[Compression]uint16{Deflate: 8, Zstd: MethodZstd}
	for _, c := range []Compression{Deflate, Zstd} {
		b.Run("decompressor/"+string(c), func(b *testing.B) {
			b.SetBytes(int64(len(wasm)))
			b.ReportAllocs()
			r := bytes.NewReader(nil)
			br := bufio.NewReaderSize(nil, StreamBuffer)
			for b.Loop() {
				r.Reset(bodies[c])
				br.Reset(r)
				dec := NewDecompressor(method[c], br, int64(len(wasm)))
				if n, err := io.Copy(io.Discard, dec); err != nil || n != int64(len(wasm)) {
					b.Fatal(n, err)
				}
				dec.Close()
			}
		})
	}
	b.Run("decompressor/zstd-unpooled", func(b *testing.B) {
		b.SetBytes(int64(len(wasm)))
		b.ReportAllocs()
		r := bytes.NewReader(nil)
		for b.Loop() {
			r.Reset(bodies[Zstd])
			dec, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
				zstd.WithDecoderMaxWindow(ZstdMaxWindow), zstd.WithDecoderMaxMemory(ZstdMaxWindow))
			if err != nil {
				b.Fatal(err)
			}
			if n, err := io.Copy(io.Discard, dec); err != nil || n != int64(len(wasm)) {
				b.Fatal(n, err)
			}
			dec.Close()
		}
	})
	for _, c := range []Compression{Deflate, Zstd} {
		b.Run("ReadPayload/"+string(c), func(b *testing.B) {
			b.SetBytes(int64(len(wasm)))
			b.ReportAllocs()
			a, err := read(packed[c])
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if got, err := a.ReadPayload(); err != nil || len(got) != len(wasm) {
					b.Fatal(len(got), err)
				}
			}
		})
	}
}

func writeFiles(tb testing.TB, dir string, files map[string][]byte) {
	tb.Helper()
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}
