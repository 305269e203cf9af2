package sandbox

import (
	"bytes"
	"context"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
)

// `mur run` loads a payload of 32 MiB, packed to a few KiB, without holding it on the heap: it is
// decompressed into the kept copy (or a file of its own when nothing is kept) and mapped from
// there. The heap is measured with the payload in hand, after a collection.
func TestLoadPayloadHoldsNoPayloadOnTheHeap(t *testing.T) {
	const size = 32 << 20
	store, err := cas.Open(filepath.Join(t.TempDir(), "cas"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	wasm := artifacttest.Padded("big", size)
	blob := artifacttest.Spec{Name: "big", Version: "1.0.0", Wasm: wasm, Compression: "zstd"}.Zip()
	d, err := store.Ingest(ctx, bytes.NewReader(blob), int64(len(blob)), digest.FromBytes(blob))
	if err != nil {
		t.Fatal(err)
	}
	kept := filepath.Join(t.TempDir(), "payloads")
	for _, c := range []struct{ name, dir string }{{"nothing kept", ""}, {"kept", kept}, {"kept already", kept}} {
		before := artifacttest.LiveHeap()
		got, _, err := LoadPayload(ctx, store, d, c.dir)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		after := artifacttest.LiveHeap()
		if !bytes.Equal(got, wasm) {
			t.Fatalf("%s: LoadPayload returned %d bytes, not the %d-byte payload", c.name, len(got), len(wasm))
		}
		if held := after - min(after, before); held > size/4 {
			t.Errorf("%s: the heap holds %d MiB more with the %d MiB payload loaded; want it mapped", c.name, held>>20, size>>20)
		}
		runtime.KeepAlive(got)
	}
}
