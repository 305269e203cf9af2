package e2e

import (
	"bytes"
	"os"
	"testing"

	"github.com/klauspost/compress/zip"
)

// hostileZips are packed artifacts that a reader must refuse, by name.
func hostileZips(t *testing.T) map[string][]byte {
	t.Helper()
	manifest := "name: evil\nversion: 1.0.0\n"
	wasm := "\x00asm\x01\x00\x00\x00"
	build := func(entries ...func(*zip.Writer)) []byte {
		var b bytes.Buffer
		zw := zip.NewWriter(&b)
		for _, e := range entries {
			e(zw)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	file := func(name, content string) func(*zip.Writer) {
		return func(zw *zip.Writer) {
			w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate})
			if err != nil {
				t.Fatal(err)
			}
			w.Write([]byte(content))
		}
	}
	symlink := func(name, target string) func(*zip.Writer) {
		return func(zw *zip.Writer) {
			h := &zip.FileHeader{Name: name, Method: zip.Store}
			h.SetMode(os.ModeSymlink | 0o777)
			w, err := zw.CreateHeader(h)
			if err != nil {
				t.Fatal(err)
			}
			w.Write([]byte(target))
		}
	}
	return map[string][]byte{
		"dotdot":    build(file("murmur.yaml", manifest), file("capsule.wasm", wasm), file("../escape.txt", "x")),
		"absolute":  build(file("murmur.yaml", manifest), file("capsule.wasm", wasm), file("/etc/evil", "x")),
		"symlink":   build(file("murmur.yaml", manifest), file("capsule.wasm", wasm), symlink("link", "/etc/passwd")),
		"duplicate": build(file("murmur.yaml", manifest), file("capsule.wasm", wasm), file("capsule.wasm", wasm)),
		"nowasm":    build(file("murmur.yaml", manifest)),
		"twowasm":   build(file("murmur.yaml", manifest), file("a.wasm", wasm), file("b.wasm", wasm)),
		"notutf8":   build(file("murmur.yaml", "name: \xff\xfe\nversion: 1.0.0\n"), file("capsule.wasm", wasm)),
	}
}
