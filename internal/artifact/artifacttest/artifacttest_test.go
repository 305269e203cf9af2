package artifacttest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/murmur-nexus/mur/internal/artifact"
)

// TestModulesCompile checks that every module this package makes is one wazero accepts, and that
// seeds and tags give different bytes.
func TestModulesCompile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	mods := map[string][]byte{
		"empty":       []byte(EmptyModule),
		"module 0":    Module(0, 1),
		"module 2000": Module(2000, 1),
		"module 300":  Module(300, 2),
		"tagged":      Tagged("grep"),
		"long tag":    Tagged(string(bytes.Repeat([]byte("t"), 200))),
	}
	for name, m := range mods {
		if _, err := rt.CompileModule(ctx, m); err != nil {
			t.Errorf("%s does not compile: %v", name, err)
		}
	}
	if len(mods["module 2000"]) < 2000 {
		t.Errorf("Module(2000, 1) is %d bytes", len(mods["module 2000"]))
	}
	if !bytes.Equal(Module(300, 7), Module(300, 7)) || bytes.Equal(Module(300, 7), Module(300, 8)) {
		t.Error("Module is not a function of its seed")
	}
	if bytes.Equal(Tagged("a"), Tagged("b")) {
		t.Error("two tags gave one module")
	}
}

func read(t *testing.T, zip []byte) *artifact.Archive {
	t.Helper()
	a, err := artifact.Read(bytes.NewReader(zip), int64(len(zip)))
	if err != nil {
		t.Fatalf("artifact.Read refuses what packtest packed: %v", err)
	}
	return a
}

func TestZip(t *testing.T) {
	t.Parallel()
	wasm := Module(500, 3)
	z := Zip("grep", "1.2.0+b1", wasm)
	if !bytes.Equal(z, Zip("grep", "1.2.0+b1", wasm)) {
		t.Fatal("two packs of one artifact differ")
	}
	a := read(t, z)
	if m := a.Manifest; m.Name != "grep" || m.Version != "1.2.0+b1" || m.Runtime != "tool" {
		t.Errorf("manifest %+v", m)
	}
	if a.PayloadName != "capsule.wasm" {
		t.Errorf("payload %q", a.PayloadName)
	}
	if got, err := a.ReadPayload(); err != nil || !bytes.Equal(got, wasm) {
		t.Errorf("payload %d bytes, %v; want the %d given", len(got), err, len(wasm))
	}
	if got, _ := read(t, Zip("grep", "1.2.0", nil)).ReadPayload(); string(got) != EmptyModule {
		t.Errorf("nil wasm packed %q, want the empty module", got)
	}
}

func TestSpec(t *testing.T) {
	t.Parallel()
	s := Spec{Name: "multi", Version: "2.0.0", Description: "built for linux-x86_64", Payload: "multi.wasm"}
	a := read(t, s.Zip())
	if a.Manifest.Description != s.Description || a.PayloadName != "multi.wasm" || string(a.ManifestBytes) != s.Manifest() {
		t.Errorf("archive %+v, manifest %q", a.Manifest, a.ManifestBytes)
	}
	other := s
	other.Description = "built for linux-aarch64"
	if bytes.Equal(s.Zip(), other.Zip()) {
		t.Error("two descriptions packed the same bytes")
	}
}

func TestSpecRefusedPanics(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Error("packing a payload that is not wasm did not panic")
		}
	}()
	Spec{Name: "grep", Version: "1.0.0", Wasm: []byte("not wasm")}.Zip()
}

func TestFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := File(t, dir, "find", "0.3.0", Tagged("f"))
	if p != filepath.Join(dir, "find-0.3.0.mur.zip") {
		t.Fatalf("File wrote %s", p)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, Zip("find", "0.3.0", Tagged("f"))) {
		t.Error("the file holds other bytes than Zip")
	}
}
