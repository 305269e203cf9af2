package pull_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/internal/slowdown/deadline"
)

// A pull that precompiles a payload of 32 MiB, packed to a few KiB, hands the compiler the whole
// payload without holding it on the heap: it is mapped from a file on the CAS's disk, which the
// kernel can drop and read back. The heap is measured when the compiler is called, with the
// payload in hand, after a collection: what is still live then is what the pull holds.
func TestPrecompileHoldsNoPayloadOnTheHeap(t *testing.T) {
	const size = 32 << 20
	w := pulltest.NewWorld(t)
	st := pulltest.LayoutStore(t)
	name := ref.Name{Scope: "acme", Name: "big"}
	wasm := artifacttest.Padded("big", size)
	pulltest.Push(t, st, name, "1.0.0", "any", pulltest.Packed{Zip: artifacttest.Spec{Name: "big", Version: "1.0.0", Wasm: wasm}.Zip()})
	p := w.Puller(st)
	base := artifacttest.LiveHeap()
	var held uint64
	var got int
	p.Compile.Precompile = func(_ context.Context, b []byte) error {
		now := artifacttest.LiveHeap()
		held, got = now-min(now, base), len(b)
		if got != len(wasm) || string(b[len(b)-64:]) != string(wasm[len(wasm)-64:]) {
			t.Errorf("the compiler was handed %d bytes, not the %d-byte payload", len(b), len(wasm))
		}
		return nil
	}
	w.MustPull(p, pulltest.Req(name, "1.0.0"))
	if got == 0 {
		t.Fatal("nothing was precompiled")
	}
	if held > size/4 {
		t.Errorf("the heap held %d MiB more while the %d MiB payload was compiled; want it mapped, not on the heap", held>>20, size>>20)
	}
}

// A compile that the command stops waiting for when it is interrupted (cmd's interruptible) may
// read the payload after Precompile returned: the mapping stays until the process ends, so that
// read finds the payload, not an unmapped page.
func TestAnInterruptedPrecompileKeepsThePayloadMapped(t *testing.T) {
	w := pulltest.NewWorld(t)
	st := pulltest.LayoutStore(t)
	name := ref.Name{Scope: "acme", Name: "big"}
	wasm := artifacttest.Padded("big", 4<<20)
	pulltest.Push(t, st, name, "1.0.0", "any", pulltest.Packed{Zip: artifacttest.Spec{Name: "big", Version: "1.0.0", Wasm: wasm}.Zip()})
	p := w.Puller(st)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	readNow, read := make(chan struct{}), make(chan bool, 1)
	p.Compile.Precompile = func(ctx context.Context, b []byte) error {
		go func() {
			<-readNow
			read <- bytes.Equal(b, wasm) // still compiling, after the command moved on
		}()
		cancel() // Ctrl-C
		return ctx.Err()
	}
	p.Pull(ctx, w.Proj, []pull.Request{pulltest.Req(name, "1.0.0")})
	close(readNow)
	if !deadline.Recv(t, read, "the abandoned compile's read") {
		t.Error("the abandoned compile read other bytes than the payload")
	}
}
