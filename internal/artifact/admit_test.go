package artifact

import (
	"bytes"
	"errors"
	"testing"

	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
)

// CheckBlob tells bytes that are no zip (ErrNotZip: a JSON bundle, anything) from a zip that is
// a packed artifact mur refuses, at Read (a frame refused at the payload's first bytes) or in the
// stream after it, and passes a sound artifact, from its own read or from the stream given.
func TestCheckBlob(t *testing.T) {
	wasm := bigWasm(true)
	good := zstdZip(t, zstdOf(t, wasm), wasm, -1, -1)
	for _, stream := range []bool{false, true} {
		var r *bytes.Reader
		if stream {
			r = bytes.NewReader(good)
		}
		a, err := CheckBlob(bytes.NewReader(good), int64(len(good)), readerOrNil(r))
		if err != nil || a == nil || a.PayloadSize != int64(len(wasm)) {
			t.Fatalf("a sound artifact (stream given: %v): %v", stream, err)
		}
	}
	for name, b := range map[string][]byte{
		"JSON":  []byte(`{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json"}`),
		"empty": nil,
		"junk":  bytes.Repeat([]byte("PK"), 1000),
	} {
		_, err := CheckBlob(bytes.NewReader(b), int64(len(b)), nil)
		if !errors.Is(err, ErrNotZip) || !errors.Is(err, errs.InvalidArtifact) {
			t.Errorf("%s: %v; want invalid-artifact wrapping ErrNotZip", name, err)
		}
	}
	skippable := []byte{0x50, 0x2a, 0x4d, 0x18, 64, 0, 0, 0}
	for name, c := range map[string]struct {
		z    []byte
		says string
	}{
		"a 2 GiB window, refused at Read":   {zstdZip(t, frameSpec{window: windowLog(31), content: -1}.frame(wasm), wasm, -1, -1), "2147483648-byte window"},
		"a skippable frame past the entry":  {zstdZip(t, append(append([]byte(nil), zstdOf(t, wasm)...), skippable...), wasm, -1, -1), "bytes of zstd stream, but the zip records"},
		"a wrong CRC-32, refused streaming": {zstdZip(t, zstdOf(t, wasm), wasm, -1, 7), "crc32:00000007"},
		"a zip with no manifest, at Read":   {buildZip(t, entry{name: "capsule.wasm", data: coreWasm}), "no murmur.yaml"},
	} {
		_, err := CheckBlob(bytes.NewReader(c.z), int64(len(c.z)), nil)
		if errors.Is(err, ErrNotZip) {
			t.Errorf("%s: taken for no zip: %v", name, err)
		}
		errtest.WantToken(t, err, errs.InvalidArtifact, c.says)
	}
}

// readerOrNil keeps a nil *bytes.Reader from becoming a non-nil io.Reader.
func readerOrNil(r *bytes.Reader) interface{ Read([]byte) (int, error) } {
	if r == nil {
		return nil
	}
	return r
}
