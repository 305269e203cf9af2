package artifact

import (
	"bufio"
	"bytes"
	"io"
	"testing"

	"github.com/klauspost/compress/zip"
)

// entryReads counts every read of entry data begun (CheckStream, OpenPayload, NewDecompressor)
// and not Read, which decodes only the manifest and the payload's first bytes: Read is all mur
// verify reads a blob with, so it must read no entry, and each of the others must count.
func TestEntryReadsCountsEntryReadsOnly(t *testing.T) {
	// Stored entries: CheckStream opens no decompressor, so only its own count shows.
	z := buildZip(t, entry{fh: &zip.FileHeader{Name: "murmur.yaml", Method: zip.Store}, data: goodManifest},
		entry{fh: &zip.FileHeader{Name: "capsule.wasm", Method: zip.Store}, data: coreWasm})
	count := func(what string, want int64, f func()) {
		t.Helper()
		before := entryReads.Load()
		f()
		if got := entryReads.Load() - before; got != want {
			t.Errorf("%s: entryReads grew by %d, want %d", what, got, want)
		}
	}
	var a *Archive
	count("Read", 0, func() {
		var err error
		if a, err = read(z); err != nil {
			t.Fatal(err)
		}
	})
	count("CheckStream", 1, func() {
		if err := a.CheckStream(bytes.NewReader(z)); err != nil {
			t.Fatal(err)
		}
	})
	count("OpenPayload", 1, func() {
		rc, err := a.OpenPayload()
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, rc)
		rc.Close()
	})
	count("NewDecompressor", 1, func() {
		NewDecompressor(zip.Deflate, bufio.NewReader(bytes.NewReader(deflated(t, coreWasm))), -1).Close()
	})
}
