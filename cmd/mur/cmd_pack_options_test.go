package main

import (
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/zip"

	"github.com/murmur-nexus/mur/internal/artifact"
)

// mur pack deflates the payload unless --compression says otherwise, which it reads as typed.
func TestPackCompressionFlag(t *testing.T) {
	src := packDir(t, map[string]string{"murmur.yaml": "name: grep\nversion: 1.2.0\n", "capsule.wasm": string(packWasm)})
	for _, c := range []struct {
		flags []string
		want  uint16
	}{
		{nil, zip.Deflate},
		{[]string{"--compression", "ZSTD"}, artifact.MethodZstd},
		{[]string{"--compression", "deflate"}, zip.Deflate},
	} {
		file := filepath.Join(t.TempDir(), "grep.mur.zip")
		if code, _, stderr := runMur(t, append([]string{"pack", src, "-o", file}, c.flags...)...); code != 0 {
			t.Fatalf("mur pack %v exited %d: %s", c.flags, code, stderr)
		}
		zr, err := zip.OpenReader(file)
		if err != nil {
			t.Fatal(err)
		}
		if got := zr.File[len(zr.File)-1].Method; got != c.want {
			t.Errorf("mur pack %v packed the payload with method %d, want %d", c.flags, got, c.want)
		}
		zr.Close()
	}
}
