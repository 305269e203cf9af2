package artifact

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/klauspost/compress/zip"

	"github.com/murmur-nexus/mur/internal/errs"
)

func writeDir(t *testing.T, files map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func pack(t *testing.T, dir string) ([]byte, Manifest, error) {
	t.Helper()
	var buf bytes.Buffer
	m, err := Pack(dir, &buf)
	return buf.Bytes(), m, err
}

func TestPackReproducible(t *testing.T) {
	t.Parallel()
	payload := bytes.Repeat(coreWasm, 5000)
	files := map[string][]byte{"murmur.yaml": goodManifest, "capsule.wasm": payload, "README.md": []byte("ignored"), "sub/x.wasm": coreWasm, "other.wasm": coreWasm}
	dir1 := writeDir(t, files)
	first, m, err := pack(t, dir1)
	if err != nil {
		t.Fatal(err)
	}
	if m != (Manifest{Name: "grep", Version: "1.2.0", Runtime: "tool", Description: "finds things"}) {
		t.Errorf("Pack returned %+v", m)
	}
	second, _, err := pack(t, dir1)
	if err != nil || !bytes.Equal(first, second) {
		t.Fatalf("packing twice gave different bytes (%d vs %d), %v", len(first), len(second), err)
	}
	// Another folder, other timestamps, other modes: the same bytes.
	dir2 := writeDir(t, files)
	old := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	for _, name := range []string{"murmur.yaml", "capsule.wasm"} {
		os.Chtimes(filepath.Join(dir2, name), old, old)
		os.Chmod(filepath.Join(dir2, name), 0o600)
	}
	third, _, err := pack(t, dir2)
	if err != nil || !bytes.Equal(first, third) {
		t.Fatalf("packing a copy with other times and modes gave different bytes, %v", err)
	}

	a, err := read(first)
	if err != nil {
		t.Fatal(err)
	}
	if a.Manifest != m || !bytes.Equal(a.ManifestBytes, goodManifest) || a.PayloadName != "capsule.wasm" || a.PayloadSize != int64(len(payload)) {
		t.Errorf("round trip: %+v %q %d", a.Manifest, a.PayloadName, a.PayloadSize)
	}
	if got, err := a.ReadPayload(); err != nil || !bytes.Equal(got, payload) {
		t.Errorf("round trip payload: %d bytes, %v", len(got), err)
	}
	zr, err := zip.NewReader(bytes.NewReader(first), int64(len(first)))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
		if f.Mode() != 0o644 || f.Modified.Year() != 1980 && !f.Modified.IsZero() || f.ModTime().Year() != 1980 {
			t.Errorf("entry %s: mode %v, time %v", f.Name, f.Mode(), f.ModTime())
		}
		if f.Method != zip.Deflate {
			t.Errorf("entry %s: method %d", f.Name, f.Method)
		}
	}
	if len(names) != 2 || names[0] != "murmur.yaml" || names[1] != "capsule.wasm" {
		t.Errorf("entries = %q; want murmur.yaml then capsule.wasm and nothing else", names)
	}
}

func TestPackSingleWasmAndComponent(t *testing.T) {
	t.Parallel()
	dir := writeDir(t, map[string][]byte{"murmur.yaml": []byte("name: grep\nversion: 1.0.0\n"), "grep.wasm": componentWasm})
	z, _, err := pack(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	a, err := read(z)
	if err != nil || a.PayloadName != "grep.wasm" || !a.Component {
		t.Fatalf("read back: %+v, %v", a, err)
	}
}

func TestPackSymlinkedPayload(t *testing.T) {
	t.Parallel()
	dir := writeDir(t, map[string][]byte{"murmur.yaml": goodManifest, "build/out.wasm": coreWasm})
	if err := os.Symlink(filepath.Join(dir, "build/out.wasm"), filepath.Join(dir, "capsule.wasm")); err != nil {
		t.Skip(err)
	}
	z, _, err := pack(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	a, err := read(z)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := a.ReadPayload(); !bytes.Equal(b, coreWasm) {
		t.Errorf("payload = %q", b)
	}
}

func TestPackRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		files map[string][]byte
		tok   errs.Token
		want  string
	}{
		{"two wasm", map[string][]byte{"murmur.yaml": goodManifest, "b.wasm": coreWasm, "a.wasm": coreWasm}, errs.InvalidArtifact, `2 wasm files ("a.wasm", "b.wasm") and no capsule.wasm`},
		{"no wasm", map[string][]byte{"murmur.yaml": goodManifest, "sub/capsule.wasm": coreWasm}, errs.InvalidArtifact, "no wasm payload"},
		{"no manifest", map[string][]byte{"capsule.wasm": coreWasm}, errs.InvalidArtifact, "murmur.yaml does not exist"},
		{"not wasm", map[string][]byte{"murmur.yaml": goodManifest, "capsule.wasm": []byte("#!/bin/sh\n")}, errs.InvalidArtifact, "not a WebAssembly binary"},
		{"empty wasm", map[string][]byte{"murmur.yaml": goodManifest, "capsule.wasm": nil}, errs.InvalidArtifact, "not a WebAssembly binary"},
		{"no name", map[string][]byte{"murmur.yaml": []byte("version: 1.0.0\n"), "capsule.wasm": coreWasm}, errs.InvalidArtifact, "has no name"},
		{"reserved version", map[string][]byte{"murmur.yaml": []byte("name: grep\nversion: Stable\n"), "capsule.wasm": coreWasm}, errs.InvalidArtifact, "reserved"},
		{"bad runtime", map[string][]byte{"murmur.yaml": []byte("name: grep\nversion: 1.0.0\nruntime: daemon\n"), "capsule.wasm": coreWasm}, errs.InvalidArtifact, `runtime "daemon" is not one of tool, driver, hook, skill, capsule`},
		{"manifest not utf-8", map[string][]byte{"murmur.yaml": []byte("name: grep\nversion: 1.0.0\n# \xff\n"), "capsule.wasm": coreWasm}, errs.InvalidArtifact, "not UTF-8"},
		{"manifest too big", map[string][]byte{"murmur.yaml": append([]byte("name: grep\nversion: \"1\"\n#"), bytes.Repeat([]byte("x"), MaxManifestBytes)...), "capsule.wasm": coreWasm}, errs.InvalidArtifact, "over the limit"},
		{"backslash payload name", map[string][]byte{"murmur.yaml": goodManifest, `a\b.wasm`: coreWasm}, errs.InvalidArtifact, "backslash"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := pack(t, writeDir(t, tt.files))
			if !errors.Is(err, tt.tok) {
				t.Fatalf("Pack = %v; want token %s", err, tt.tok)
			}
			if !bytes.Contains([]byte(err.Error()), []byte(tt.want)) {
				t.Fatalf("Pack error %q does not contain %q", err, tt.want)
			}
		})
	}
	if _, _, err := pack(t, filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("Pack of a missing folder succeeded")
	}
}

func TestPackCeiling(t *testing.T) {
	t.Setenv(EnvMaxDecompressed, "100")
	dir := writeDir(t, map[string][]byte{"murmur.yaml": goodManifest, "capsule.wasm": append(coreWasm, make([]byte, 100)...)})
	var buf bytes.Buffer
	_, err := Pack(dir, &buf)
	if !errors.Is(err, errs.InvalidArtifact) || !bytes.Contains([]byte(err.Error()), []byte("over the ceiling of 100 bytes")) {
		t.Fatalf("Pack = %v", err)
	}
	if buf.Len() != 0 {
		t.Errorf("Pack wrote %d bytes before refusing", buf.Len())
	}
}

func TestPackWritesNothingOnRefusal(t *testing.T) {
	t.Parallel()
	dir := writeDir(t, map[string][]byte{"murmur.yaml": goodManifest, "a.wasm": coreWasm, "b.wasm": coreWasm})
	var buf bytes.Buffer
	if _, err := Pack(dir, &buf); err == nil || buf.Len() != 0 {
		t.Fatalf("Pack = %v, wrote %d bytes", err, buf.Len())
	}
}

// Compressors are kept from one pack for the next (pack.go): one that packed other bytes, with
// other sizes and other compression, leaves nothing behind, so an artifact packs to the same
// bytes whatever was packed before it in the process.
func TestPackKeepsNothingFromTheLastPack(t *testing.T) {
	t.Parallel()
	small := writeDir(t, map[string][]byte{"murmur.yaml": goodManifest, "capsule.wasm": coreWasm})
	large := writeDir(t, map[string][]byte{"murmur.yaml": []byte("name: other\nversion: 2.0.0\n"), "capsule.wasm": bytes.Repeat(append(coreWasm, 7, 9, 11), 40000)})
	for _, c := range []Compression{Deflate, Zstd} {
		packOf := func(dir string, c Compression) []byte {
			t.Helper()
			var buf bytes.Buffer
			if _, err := PackWith(dir, &buf, PackOptions{Compression: c}); err != nil {
				t.Fatal(err)
			}
			return buf.Bytes()
		}
		first := packOf(small, c)
		for _, between := range []Compression{Deflate, Zstd} {
			packOf(large, between)
			if again := packOf(small, c); !bytes.Equal(first, again) {
				t.Errorf("%s: packed after a %s pack of other bytes, the artifact differs (%d bytes, then %d)", c, between, len(first), len(again))
			}
		}
	}
}
