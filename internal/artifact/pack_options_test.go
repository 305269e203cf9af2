package artifact

import (
	"bytes"
	"io"
	"testing"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/zip"
	"github.com/klauspost/compress/zstd"
)

// packedPayload packs payload with compression c and returns the payload entry's method and
// its data as packed.
func packedPayload(t *testing.T, payload []byte, c Compression) (uint16, []byte) {
	t.Helper()
	var buf bytes.Buffer
	if _, err := PackWith(writeDir(t, map[string][]byte{"murmur.yaml": goodManifest, "capsule.wasm": payload}), &buf, PackOptions{Compression: c}); err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	f := zr.File[len(zr.File)-1]
	raw, err := f.OpenRaw()
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(raw)
	if err != nil {
		t.Fatal(err)
	}
	return f.Method, data
}

// Pack compresses with the settings its package comment promises, which make its output the
// same bytes on every machine for a release of mur: deflate at level 6, and zstd at the best
// level, one goroutine, an 8 MiB window at most, the content size and a checksum in the frame.
// Each is held to what an encoder set up that way writes, independently of Pack's own setup.
func TestPackCompressesAsPromised(t *testing.T) {
	payload := bigWasm(true)
	t.Run("deflate", func(t *testing.T) {
		method, got := packedPayload(t, payload, "")
		var want bytes.Buffer
		fw, _ := flate.NewWriter(&want, 6)
		fw.Write(payload)
		fw.Close()
		if method != zip.Deflate || !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("the default packs the payload with method %d, %d bytes; want deflate at level 6, %d bytes", method, len(got), want.Len())
		}
	})
	t.Run("zstd", func(t *testing.T) {
		method, got := packedPayload(t, payload, Zstd)
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBestCompression), zstd.WithEncoderConcurrency(1),
			zstd.WithWindowSize(ZstdMaxWindow), zstd.WithEncoderCRC(true))
		if err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		enc.ResetContentSize(&want, int64(len(payload)))
		enc.Write(payload)
		enc.Close()
		if method != MethodZstd || !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("--compression zstd packs the payload with method %d, %d bytes; want zstd at its best level, %d bytes", method, len(got), want.Len())
		}
		var h zstd.Header
		if err := h.Decode(got); err != nil || !h.HasCheckSum || !h.HasFCS {
			t.Fatalf("frame header %+v (%v); want a checksum and the content size", h, err)
		}
	})
}

// --compression is read as a user types it: any case, spaces around, empty for the default.
func TestParseCompressionAsTyped(t *testing.T) {
	for in, want := range map[string]Compression{"": Deflate, "deflate": Deflate, " ZSTD ": Zstd, "Deflate": Deflate} {
		if got, err := ParseCompression(in); err != nil || got != want {
			t.Errorf("ParseCompression(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// A payload larger than the window mur decodes with is packed in frames of that window, not of a
// larger one, nor as one segment (whose window is the whole payload): readers refuse both.
func TestPackZstdLargerThanTheWindow(t *testing.T) {
	payload := append(append([]byte(nil), coreWasm...), make([]byte, ZstdMaxWindow+4096)...)
	_, got := packedPayload(t, payload, Zstd)
	var h zstd.Header
	if err := h.Decode(got); err != nil || h.SingleSegment || h.WindowSize != ZstdMaxWindow || h.FrameContentSize != uint64(len(payload)) {
		t.Fatalf("frame header %+v (%v); want a %d-byte window over the %d-byte payload", h, err, ZstdMaxWindow, len(payload))
	}
}
