package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zip"

	"github.com/murmur-nexus/mur/internal/artifact"
)

var packWasm = append([]byte("\x00asm\x01\x00\x00\x00"), bytes.Repeat([]byte("payload "), 1000)...)

func packDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestPackReproducibleDigest(t *testing.T) {
	t.Parallel()
	src := packDir(t, map[string]string{"murmur.yaml": "name: grep\nversion: 1.2.0+b1\n", "capsule.wasm": string(packWasm), "notes.txt": "not packed"})
	out := t.TempDir()
	var results []packResult
	for _, name := range []string{"one.mur.zip", "two.mur.zip"} {
		file := filepath.Join(out, name)
		code, stdout, stderr := runMur(t, "pack", src, "-o", file, "--json")
		if code != 0 {
			t.Fatalf("mur pack exited %d: %s", code, stderr)
		}
		var r packResult
		if err := json.Unmarshal([]byte(stdout), &r); err != nil {
			t.Fatalf("--json output %q: %v", stdout, err)
		}
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		if r.File != file || r.Digest != "sha256:"+hex.EncodeToString(sum[:]) || r.Size != int64(len(data)) || r.Name != "grep" || r.Version != "1.2.0+b1" {
			t.Fatalf("result %+v does not describe the %d-byte file written", r, len(data))
		}
		results = append(results, r)
	}
	if results[0].Digest != results[1].Digest {
		t.Errorf("packing twice gave digests %s and %s", results[0].Digest, results[1].Digest)
	}
}

func TestPackDefaultOutput(t *testing.T) {
	src := packDir(t, map[string]string{"murmur.yaml": "name: grep\nversion: 1.2.0\n", "grep.wasm": string(packWasm)})
	cwd := t.TempDir()
	t.Chdir(cwd)
	code, stdout, stderr := runMur(t, "pack", src)
	if code != 0 {
		t.Fatalf("mur pack exited %d: %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(cwd, "grep-1.2.0.mur.zip")); err != nil {
		t.Fatalf("default output missing: %v", err)
	}
	if !strings.Contains(stdout, "grep-1.2.0.mur.zip") || !strings.Contains(stdout, "sha256:") {
		t.Errorf("stdout %q does not name the file and its digest", stdout)
	}
}

func TestPackBadFolderLeavesNothing(t *testing.T) {
	src := packDir(t, map[string]string{"murmur.yaml": "name: grep\nversion: 1.2.0\n", "a.wasm": string(packWasm), "b.wasm": string(packWasm)})
	out := t.TempDir()
	file := filepath.Join(out, "grep.mur.zip")
	code, _, stderr := runMur(t, "pack", src, "-o", file)
	if code != 1 || !strings.Contains(stderr, "mur: invalid-artifact: ") || !strings.Contains(stderr, `"a.wasm", "b.wasm"`) {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	entries, _ := os.ReadDir(out)
	if len(entries) != 0 {
		t.Errorf("a failed pack left %v in the output folder", entries)
	}
	// The same with the default output name, in the current folder.
	t.Chdir(out)
	if code, _, _ := runMur(t, "pack", src); code != 1 {
		t.Fatalf("exit %d", code)
	}
	if entries, _ := os.ReadDir(out); len(entries) != 0 {
		t.Errorf("a failed pack left %v in the current folder", entries)
	}
}

func TestPackUsage(t *testing.T) {
	t.Parallel()
	if code, _, stderr := runMur(t, "pack"); code != 2 || !strings.Contains(stderr, "mur: usage:") {
		t.Errorf("no folder: exit %d, %q", code, stderr)
	}
	if code, _, stderr := runMur(t, "pack", filepath.Join(t.TempDir(), "missing")); code != 1 || !strings.Contains(stderr, "not-found") {
		t.Errorf("missing folder: exit %d, %q", code, stderr)
	}
	src := packDir(t, map[string]string{"murmur.yaml": "name: grep\nversion: 1.2.0\n", "capsule.wasm": string(packWasm)})
	if code, _, stderr := runMur(t, "pack", src, "-o", t.TempDir()); code != 2 || !strings.Contains(stderr, "is a folder") {
		t.Errorf("output is a folder: exit %d, %q", code, stderr)
	}
	if code, _, stderr := runMur(t, "pack", src, "-o", filepath.Join(t.TempDir(), "no", "such", "x.mur.zip")); code != 1 || !strings.Contains(stderr, "mur: io:") {
		t.Errorf("output folder missing: exit %d, %q", code, stderr)
	}
	noManifest := packDir(t, map[string]string{"capsule.wasm": string(packWasm)})
	if code, _, stderr := runMur(t, "pack", noManifest); code != 1 || !strings.Contains(stderr, "murmur.yaml does not exist") {
		t.Errorf("no manifest: exit %d, %q", code, stderr)
	}
}

// --compression zstd packs the payload with zip method 93 and murmur.yaml deflated, reproducibly;
// an unknown compression is a usage error that writes nothing.
func TestPackZstd(t *testing.T) {
	t.Parallel()
	src := packDir(t, map[string]string{"murmur.yaml": "name: grep\nversion: 1.2.0\n", "capsule.wasm": string(packWasm)})
	out := t.TempDir()
	var digests []string
	for _, name := range []string{"one.mur.zip", "two.mur.zip"} {
		file := filepath.Join(out, name)
		code, stdout, stderr := runMur(t, "pack", src, "-o", file, "--compression", "zstd", "--json")
		if code != 0 {
			t.Fatalf("mur pack --compression zstd exited %d: %s", code, stderr)
		}
		var r packResult
		if err := json.Unmarshal([]byte(stdout), &r); err != nil {
			t.Fatal(err)
		}
		digests = append(digests, r.Digest)
		zr, err := zip.OpenReader(file)
		if err != nil {
			t.Fatal(err)
		}
		if len(zr.File) != 2 || zr.File[0].Method != zip.Deflate || zr.File[1].Method != artifact.MethodZstd {
			t.Errorf("entries %v; want murmur.yaml deflated and the payload with zstd", zr.File)
		}
		zr.Close()
	}
	if digests[0] != digests[1] {
		t.Errorf("packing twice with zstd gave digests %s and %s", digests[0], digests[1])
	}
	file := filepath.Join(out, "bad.mur.zip")
	if code, _, stderr := runMur(t, "pack", src, "-o", file, "--compression", "brotli"); code != 2 || !strings.Contains(stderr, "mur: usage:") || !strings.Contains(stderr, "zstd") {
		t.Errorf("--compression brotli: exit %d, %q", code, stderr)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("a refused pack wrote %s: %v", file, err)
	}
}
