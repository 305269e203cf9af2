// Package artifacttest builds packed artifacts (.mur.zip) and small wasm modules for tests, through
// the publisher's own artifact.Pack, so that what tests serve is what a real publisher would.
package artifacttest

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/zip"
	"github.com/klauspost/compress/zstd"

	"github.com/murmur-nexus/mur/internal/artifact"
)

// EmptyModule is the smallest valid WebAssembly core module.
const EmptyModule = "\x00asm\x01\x00\x00\x00"

// Module is a valid empty core module padded with a custom section of size pseudo-random bytes
// (at least one, because wazero refuses an empty custom section), so that each seed gives other
// bytes.
func Module(size int, seed uint64) []byte {
	b, pad := custom("pad", max(size, 1))
	// ChaCha8 fills the section a block at a time: a byte at a time costs seconds per 100 MiB
	// under -race, where every write is checked.
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	binary.LittleEndian.PutUint64(key[8:], seed^0x9e3779b97f4a7c15)
	rand.NewChaCha8(key).Read(pad)
	return b
}

// Tagged is a valid empty core module with a custom section named tag and holding tag, so that a
// test can tell payloads apart by a readable name.
func Tagged(tag string) []byte {
	b, content := custom(tag, len(tag))
	copy(content, tag)
	return b
}

// Padded is a valid empty core module with a custom section named tag of size zero bytes: a
// payload that compresses to almost nothing, as a decompression bomb's does.
func Padded(tag string, size int) []byte {
	b, _ := custom(tag, max(size, 1))
	return b
}

// custom is a valid empty core module with one custom section named name and size bytes long,
// zeroed, which it returns apart for the caller to fill. It is allocated once, at its size: the
// modules of the memory tests are tens of MiB.
func custom(name string, size int) (module, content []byte) {
	head := binary.AppendUvarint(nil, uint64(len(name)))
	head = append(head, name...)
	b := append([]byte(EmptyModule), 0)
	b = binary.AppendUvarint(b, uint64(len(head)+size))
	b = append(b, head...)
	module = make([]byte, len(b)+size)
	copy(module, b)
	return module, module[len(b):]
}

// Spec describes a packed artifact.
type Spec struct {
	Name    string // bare, as murmur.yaml has it: grep, not acme/grep
	Version string
	// Description, when set, goes into murmur.yaml: two builds of one version with the same
	// payload then differ.
	Description string
	Payload     string // the payload's file name; "" means capsule.wasm
	Wasm        []byte // the payload; nil means EmptyModule
	// Compression is `mur pack --compression`: "" deflates the payload, artifact.Zstd packs it
	// with zstd.
	Compression artifact.Compression
}

// Manifest is the murmur.yaml that Zip packs.
func (s Spec) Manifest() string {
	y := fmt.Sprintf("name: %s\nversion: %q\nruntime: tool\n", s.Name, s.Version)
	if s.Description != "" {
		y += "description: " + s.Description + "\n"
	}
	return y
}

// Zip packs s with artifact.Pack. The same Spec always gives the same bytes. A Spec that Pack
// refuses is a mistake in the test, so it panics.
func (s Spec) Zip() []byte {
	payload, wasm := s.Payload, s.Wasm
	if payload == "" {
		payload = "capsule.wasm"
	}
	if wasm == nil {
		wasm = []byte(EmptyModule)
	}
	// Packing is reproducible, so a spec packed before is not packed again: tests pack the same
	// small artifacts over and over, and a pack costs milliseconds under -race.
	key := zipKey{s.Name, s.Version, s.Description, payload, s.Compression, sha256.Sum256(wasm)}
	remember := len(wasm) <= maxRemembered
	if remember {
		zips.mu.Lock()
		z, ok := zips.m[key]
		zips.mu.Unlock()
		if ok {
			return bytes.Clone(z)
		}
	}
	dir, err := os.MkdirTemp("", "packtest-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "murmur.yaml"), []byte(s.Manifest()), 0o644); err != nil {
		panic(err)
	}
	if err := os.WriteFile(filepath.Join(dir, payload), wasm, 0o644); err != nil {
		panic(err)
	}
	var buf bytes.Buffer
	buf.Grow(min(len(wasm), maxRemembered) + 4096) // a random payload packs to about its size, a padded one to little
	if _, err := artifact.PackWith(dir, &buf, artifact.PackOptions{Compression: s.Compression}); err != nil {
		panic(fmt.Sprintf("packtest: packing %s@%s: %v", s.Name, s.Version, err))
	}
	if remember {
		zips.mu.Lock()
		if zips.m == nil {
			zips.m = map[zipKey][]byte{}
		}
		zips.m[key] = bytes.Clone(buf.Bytes())
		zips.mu.Unlock()
	}
	return buf.Bytes()
}

// maxRemembered is the largest payload whose packed artifact Zip keeps for the next call: the
// large ones are few, and would stay in memory until the test binary ends.
const maxRemembered = 1 << 20

type zipKey struct {
	name, version, description, payload string
	compression                         artifact.Compression
	wasm                                [32]byte
}

var zips struct {
	mu sync.Mutex
	m  map[zipKey][]byte
}

// Zip packs name@version (runtime tool) around wasm, or EmptyModule when wasm is nil.
func Zip(name, version string, wasm []byte) []byte {
	return Spec{Name: name, Version: version, Wasm: wasm}.Zip()
}

// File writes Zip(name, version, wasm) to dir/<name>-<version>.mur.zip, the file name a
// publisher gives it, and returns that path.
func File(t testing.TB, dir, name, version string, wasm []byte) string {
	t.Helper()
	out := filepath.Join(dir, artifact.FileName(name, version))
	if err := os.WriteFile(out, Zip(name, version, wasm), 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// FileSum is the SHA-256 (lowercase hex) and size of the file at path, computed here rather than
// by the code under test, so that tests check mur's digests against an independent one.
func FileSum(t testing.TB, path string) (string, int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), int64(len(b))
}

// Lying packs s with a payload entry whose zip header records crc and size instead of the
// payload's own, the way a damaged or hostile archive does: its directory reads, and only reading
// the payload to its end can tell. stored writes the payload as it is (zip method Store), else
// deflated.
func (s Spec) Lying(stored bool, crc uint32, size uint64) []byte {
	method := zip.Deflate
	if stored {
		method = zip.Store
	}
	return s.Raw(method, Compress(method, s.wasm()), crc, size)
}

func (s Spec) wasm() []byte {
	if s.Wasm == nil {
		return []byte(EmptyModule)
	}
	return s.Wasm
}

// Compress is b as zip method (zip.Store, zip.Deflate or artifact.MethodZstd) holds it; zstd at
// klauspost/compress's default level, with the content size and a checksum in the frame.
func Compress(method uint16, b []byte) []byte {
	var c bytes.Buffer
	switch method {
	case zip.Store:
		return b
	case zip.Deflate:
		fw, _ := flate.NewWriter(&c, flate.DefaultCompression)
		fw.Write(b)
		fw.Close()
	case artifact.MethodZstd:
		zw, _ := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
		zw.ResetContentSize(&c, int64(len(b)))
		zw.Write(b)
		zw.Close()
	default:
		panic(fmt.Sprintf("artifacttest: no compressor for zip method %d", method))
	}
	return c.Bytes()
}

// Raw packs s with a payload entry of zip method whose data is body exactly, and whose zip
// header records crc and size: bodies no compressor writes (damaged, hostile or foreign), and
// headers that lie. The local header records the sizes (no data descriptor), as CreateRaw writes.
func (s Spec) Raw(method uint16, body []byte, crc uint32, size uint64) []byte {
	payload := s.Payload
	if payload == "" {
		payload = "capsule.wasm"
	}
	var out bytes.Buffer
	zw := zip.NewWriter(&out)
	mw, err := zw.CreateHeader(&zip.FileHeader{Name: artifact.ManifestName, Method: zip.Deflate})
	if err != nil {
		panic(err)
	}
	mw.Write([]byte(s.Manifest()))
	pw, err := zw.CreateRaw(&zip.FileHeader{Name: payload, Method: method, CRC32: crc,
		CompressedSize64: uint64(len(body)), UncompressedSize64: size})
	if err != nil {
		panic(err)
	}
	pw.Write(body)
	if err := zw.Close(); err != nil {
		panic(err)
	}
	return out.Bytes()
}

// LiveHeap is the heap still reachable, for tests that pin what holding a payload costs: two
// collections empty the pools too (a pooled zstd decoder keeps its 8 MiB window until then),
// which are not what the code under test holds.
func LiveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
