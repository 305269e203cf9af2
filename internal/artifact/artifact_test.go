package artifact

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/zip"

	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
)

var (
	coreWasm      = []byte("\x00asm\x01\x00\x00\x00rest-of-a-core-module")
	componentWasm = []byte("\x00asm\x0d\x00\x01\x00rest-of-a-component")
	goodManifest  = []byte("name: grep\nversion: \"1.2.0\"\nruntime: tool\ndescription: finds things\ncapabilities:\n  env: { allow: [HOME] }\n")
)

// entry is one member of a test zip. raw, when set, writes the bytes as they are with the
// header's CRC and sizes taken from fh, so tests can lie.
type entry struct {
	name string
	data []byte
	mode fs.FileMode // 0 means a plain file
	fh   *zip.FileHeader
	raw  bool
}

func buildZip(t testing.TB, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		fh := e.fh
		if fh == nil {
			fh = &zip.FileHeader{Name: e.name, Method: zip.Deflate}
			if e.mode != 0 {
				fh.SetMode(e.mode)
			}
		}
		var w io.Writer
		var err error
		if e.raw {
			w, err = zw.CreateRaw(fh)
		} else {
			w, err = zw.CreateHeader(fh)
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(e.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func read(b []byte) (*Archive, error) { return Read(bytes.NewReader(b), int64(len(b))) }

func manifestEntry() entry { return entry{name: "murmur.yaml", data: goodManifest} }

func TestReadGood(t *testing.T) {
	t.Parallel()
	z := buildZip(t, manifestEntry(), entry{name: "docs/", mode: fs.ModeDir | 0o755}, entry{name: "docs/README.md", data: []byte("hi")},
		entry{name: "other.wasm", data: coreWasm}, entry{name: "capsule.wasm", data: coreWasm}, entry{name: "sub/x.wasm", data: coreWasm})
	a, err := read(z)
	if err != nil {
		t.Fatal(err)
	}
	want := Manifest{Name: "grep", Version: "1.2.0", Runtime: "tool", Description: "finds things"}
	if a.Manifest != want {
		t.Errorf("Manifest = %+v, want %+v", a.Manifest, want)
	}
	if !bytes.Equal(a.ManifestBytes, goodManifest) {
		t.Errorf("ManifestBytes = %q", a.ManifestBytes)
	}
	if a.PayloadName != "capsule.wasm" || a.PayloadSize != int64(len(coreWasm)) || a.Component {
		t.Errorf("payload = %q %d component=%v", a.PayloadName, a.PayloadSize, a.Component)
	}
	got, err := a.ReadPayload()
	if err != nil || !bytes.Equal(got, coreWasm) {
		t.Errorf("ReadPayload = %q, %v", got, err)
	}
}

func TestReadSingleOtherWasm(t *testing.T) {
	t.Parallel()
	a, err := read(buildZip(t, manifestEntry(), entry{name: "sub/capsule.wasm", data: coreWasm}, entry{name: "grep.wasm", data: componentWasm}))
	if err != nil {
		t.Fatal(err)
	}
	if a.PayloadName != "grep.wasm" || !a.Component {
		t.Errorf("payload %q component=%v; want grep.wasm, a component", a.PayloadName, a.Component)
	}
}

func TestReadManifestForms(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		yaml string
		want Manifest
	}{
		{"name: grep\nversion: 1.10\n", Manifest{Name: "grep", Version: "1.10"}},
		{"name: grep\nversion: 2\nruntime: ~\n", Manifest{Name: "grep", Version: "2"}},
		{"\ufeffname: grep\nversion: 1.0.0+build.1\nextra: [1, 2]\n", Manifest{Name: "grep", Version: "1.0.0+build.1"}},
		{"v: &v \"3.0.0\"\nname: grep\nversion: *v\n", Manifest{Name: "grep", Version: "3.0.0"}},
	} {
		m, err := ParseManifest([]byte(tt.yaml))
		if err != nil || m != tt.want {
			t.Errorf("ParseManifest(%q) = %+v, %v; want %+v", tt.yaml, m, err, tt.want)
		}
	}
}

func TestReadRefusals(t *testing.T) {
	t.Parallel()
	wasm := entry{name: "capsule.wasm", data: coreWasm}
	m := manifestEntry()
	many := []entry{m, wasm}
	for i := 0; i < MaxEntries; i++ {
		many = append(many, entry{name: fmt.Sprintf("d/%d", i), fh: &zip.FileHeader{Name: fmt.Sprintf("d/%d", i), Method: zip.Store}})
	}
	fatSymlink := &zip.FileHeader{Name: "link", Method: zip.Store, ExternalAttrs: 0xa1ff << 16} // creator FAT, Unix symlink bits
	fifo := &zip.FileHeader{Name: "pipe", Method: zip.Store}
	fifo.SetMode(fs.ModeNamedPipe | 0o644)
	badMethod := &zip.FileHeader{Name: "capsule.wasm", Method: 99, CRC32: crc32.ChecksumIEEE(coreWasm),
		CompressedSize64: uint64(len(coreWasm)), UncompressedSize64: uint64(len(coreWasm))}
	tests := []struct {
		name    string
		entries []entry
		want    string
	}{
		{"absolute", []entry{m, wasm, {name: "/etc/passwd", data: []byte("x")}}, `"/etc/passwd" with an absolute name`},
		{"dotdot", []entry{m, wasm, {name: "../evil", data: []byte("x")}}, `"../evil" that climbs out`},
		{"dotdot inside", []entry{m, wasm, {name: "a/../../evil", data: []byte("x")}}, "climbs out"},
		{"dotdot trailing", []entry{m, wasm, {name: "a/..", data: []byte("x")}}, "climbs out"},
		{"backslash", []entry{m, wasm, {name: `..\evil`, data: []byte("x")}}, "backslash"},
		{"drive letter", []entry{m, wasm, {name: "C:/evil", data: []byte("x")}}, "drive letter"},
		{"empty name", []entry{m, wasm, {name: "", data: []byte("x")}}, "empty name"},
		{"root name", []entry{m, wasm, {name: "./", mode: fs.ModeDir | 0o755}}, "names its root"},
		{"control char", []entry{m, wasm, {name: "a\nb", data: []byte("x")}}, "control characters"},
		{"symlink", []entry{m, wasm, {name: "link", data: []byte("/etc/passwd"), mode: fs.ModeSymlink | 0o777}}, `symlink entry "link"`},
		{"symlink wasm", []entry{m, {name: "capsule.wasm", data: []byte("/etc/passwd"), mode: fs.ModeSymlink | 0o777}}, "symlink entry"},
		{"symlink bits, FAT creator", []entry{m, wasm, {fh: fatSymlink, data: []byte("/x")}}, "symlink entry"},
		{"named pipe", []entry{m, wasm, {fh: fifo}}, "neither a file nor a folder"},
		{"duplicate", []entry{m, wasm, wasm}, `"capsule.wasm" twice`},
		{"duplicate manifest", []entry{m, m, wasm}, `"murmur.yaml" twice`},
		{"duplicate after cleaning", []entry{m, wasm, {name: "./capsule.wasm", data: coreWasm}}, `twice (as "capsule.wasm" and "./capsule.wasm")`},
		{"duplicate after cleaning slashes", []entry{m, wasm, {name: "a//b", data: nil}, {name: "a/b", data: nil}}, "twice"},
		{"dir and file", []entry{m, wasm, {name: "x/", mode: fs.ModeDir | 0o755}, {name: "x", data: nil}}, "twice"},
		{"no manifest", []entry{wasm}, `no murmur.yaml at its root (found "capsule.wasm")`},
		{"nested manifest only", []entry{{name: "sub/murmur.yaml", data: goodManifest}, wasm}, "no murmur.yaml at its root"},
		{"manifest dir", []entry{{name: "murmur.yaml/", mode: fs.ModeDir | 0o755}, wasm}, "no murmur.yaml"},
		{"manifest not utf-8", []entry{{name: "murmur.yaml", data: []byte("name: gr\xffep\nversion: 1\n")}, wasm}, "not UTF-8"},
		{"manifest two documents", []entry{{name: "murmur.yaml", data: []byte("name: grep\nversion: 1.0.0\n---\nname: evil\n")}, wasm}, "more than one YAML document"},
		{"manifest too big", []entry{{name: "murmur.yaml", data: append([]byte("name: grep\nversion: \"1\"\n#"), bytes.Repeat([]byte("x"), MaxManifestBytes)...)}, wasm}, "over the limit"},
		{"manifest no name", []entry{{name: "murmur.yaml", data: []byte("version: 1.0.0\n")}, wasm}, "has no name"},
		{"manifest null name", []entry{{name: "murmur.yaml", data: []byte("name: null\nversion: 1.0.0\n")}, wasm}, "has no name"},
		{"manifest empty", []entry{{name: "murmur.yaml", data: nil}, wasm}, "has no name"},
		{"manifest no version", []entry{{name: "murmur.yaml", data: []byte("name: grep\n")}, wasm}, "has no version"},
		{"manifest scoped name", []entry{{name: "murmur.yaml", data: []byte("name: acme/grep\nversion: 1.0.0\n")}, wasm}, "use the bare name"},
		{"manifest uppercase name", []entry{{name: "murmur.yaml", data: []byte("name: Grep\nversion: 1.0.0\n")}, wasm}, "may hold only"},
		{"manifest reserved version", []entry{{name: "murmur.yaml", data: []byte("name: grep\nversion: latest\n")}, wasm}, "reserved"},
		{"manifest bad version", []entry{{name: "murmur.yaml", data: []byte("name: grep\nversion: 1 0\n")}, wasm}, "may hold only"},
		{"manifest list name", []entry{{name: "murmur.yaml", data: []byte("name: [a]\nversion: 1.0.0\n")}, wasm}, "name must be a string"},
		{"manifest duplicate key", []entry{{name: "murmur.yaml", data: []byte("name: grep\nname: other\nversion: 1.0.0\n")}, wasm}, `"name" appears twice`},
		{"manifest a list", []entry{{name: "murmur.yaml", data: []byte("- name: grep\n")}, wasm}, "must be a mapping"},
		{"manifest not yaml", []entry{{name: "murmur.yaml", data: []byte("name: [grep\n")}, wasm}, "not valid YAML"},
		{"no wasm", []entry{m, {name: "README.md", data: []byte("x")}, {name: "sub/capsule.wasm", data: coreWasm}}, `no wasm payload: expected capsule.wasm or exactly one *.wasm at its root, found "murmur.yaml", "README.md", "sub/capsule.wasm"`},
		{"wasm dir only", []entry{m, {name: "x.wasm/", mode: fs.ModeDir | 0o755}}, "no wasm payload"},
		{"two wasm", []entry{m, {name: "b.wasm", data: coreWasm}, {name: "a.wasm", data: coreWasm}}, `2 wasm payloads at its root ("a.wasm", "b.wasm")`},
		{"too many entries", many, "holds 10002 entries, over the limit of 10000"},
		{"unknown method", []entry{m, {fh: badMethod, data: coreWasm, raw: true}}, "compression method 99"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := read(buildZip(t, tt.entries...))
			errtest.WantToken(t, err, errs.InvalidArtifact, tt.want)
		})
	}
}

func TestReadNotAZip(t *testing.T) {
	t.Parallel()
	for _, b := range [][]byte{nil, []byte("hello"), bytes.Repeat([]byte{0}, 4096), coreWasm} {
		_, err := read(b)
		errtest.WantToken(t, err, errs.InvalidArtifact, "not a readable zip archive")
	}
	if _, err := Read(bytes.NewReader(nil), -1); !errors.Is(err, errs.InvalidArtifact) {
		t.Errorf("negative size: %v", err)
	}
}

func TestReadTruncated(t *testing.T) {
	t.Parallel()
	z := buildZip(t, manifestEntry(), entry{name: "capsule.wasm", data: bytes.Repeat(coreWasm, 200)})
	for cut := 1; cut < len(z); cut += max(1, len(z)/97) {
		_, err := read(z[:len(z)-cut])
		if err == nil {
			t.Fatalf("a zip truncated by %d of %d bytes was accepted", cut, len(z))
		}
		if !errors.Is(err, errs.InvalidArtifact) {
			t.Fatalf("truncated by %d: token %s: %v", cut, errs.TokenOf(err), err)
		}
	}
}

func TestCeilingDeclared(t *testing.T) {
	t.Setenv(EnvMaxDecompressed, "1024")
	z := buildZip(t, manifestEntry(), entry{name: "capsule.wasm", data: append(coreWasm, make([]byte, 2048)...)})
	_, err := read(z)
	errtest.WantToken(t, err, errs.InvalidArtifact, fmt.Sprintf(`entry "capsule.wasm" of the packed artifact declares %d bytes decompressed, over the ceiling of 1024 bytes`, len(coreWasm)+2048))
	// An entry mur never reads is refused on its declared size too.
	z = buildZip(t, manifestEntry(), entry{name: "capsule.wasm", data: coreWasm}, entry{name: "big.bin", data: make([]byte, 4096)})
	_, err = read(z)
	errtest.WantToken(t, err, errs.InvalidArtifact, `"big.bin"`)
}

func TestCeilingEnv(t *testing.T) {
	for _, v := range []string{"abc", "-1", "0", "1.5"} {
		t.Setenv(EnvMaxDecompressed, v)
		_, err := read(buildZip(t, manifestEntry(), entry{name: "capsule.wasm", data: coreWasm}))
		if !errors.Is(err, errs.InvalidConfig) || !strings.Contains(err.Error(), EnvMaxDecompressed) {
			t.Errorf("%s=%q: %v; want invalid-config naming the variable", EnvMaxDecompressed, v, err)
		}
	}
	t.Setenv(EnvMaxDecompressed, " 4096 ")
	if n, err := MaxDecompressed(); err != nil || n != 4096 {
		t.Errorf("MaxDecompressed = %d, %v", n, err)
	}
}

// deflated compresses data the way a hostile packer would, for raw entries.
func deflated(t testing.TB, data []byte) []byte {
	var buf bytes.Buffer
	fw, _ := flate.NewWriter(&buf, flate.BestSpeed)
	fw.Write(data)
	fw.Close()
	return buf.Bytes()
}

// TestZipBomb: the header declares a small size, the stream inflates far beyond it. The reader
// must stop while streaming, without ever holding the inflated bytes.
func TestZipBomb(t *testing.T) {
	t.Setenv(EnvMaxDecompressed, fmt.Sprint(1<<20))
	bomb := append(append([]byte(nil), coreWasm...), make([]byte, 16<<20)...)
	comp := deflated(t, bomb)
	fh := &zip.FileHeader{Name: "capsule.wasm", Method: zip.Deflate, CRC32: crc32.ChecksumIEEE(bomb),
		CompressedSize64: uint64(len(comp)), UncompressedSize64: 1000}
	z := buildZip(t, manifestEntry(), entry{fh: fh, data: comp, raw: true})
	bomb = nil
	a, err := read(z)
	if err != nil {
		t.Fatalf("Read refused what only streaming can tell: %v", err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	rc, err := a.OpenPayload()
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, rc)
	rc.Close()
	runtime.ReadMemStats(&after)
	errtest.WantToken(t, err, errs.InvalidArtifact, `payload "capsule.wasm"`)
	if n > 1<<20 {
		t.Errorf("streamed %d bytes past a declared 1000 and a ceiling of 1 MiB", n)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 8<<20 {
		t.Errorf("streaming the bomb allocated %d bytes", grew)
	}
	if _, err := a.ReadPayload(); !errors.Is(err, errs.InvalidArtifact) {
		t.Errorf("ReadPayload of a bomb: %v", err)
	}

	// A manifest that lies about its size is cut at the manifest limit.
	mbomb := append([]byte("name: grep\nversion: \"1\"\n#"), make([]byte, 8<<20)...)
	mcomp := deflated(t, mbomb)
	mfh := &zip.FileHeader{Name: "murmur.yaml", Method: zip.Deflate, CRC32: crc32.ChecksumIEEE(mbomb),
		CompressedSize64: uint64(len(mcomp)), UncompressedSize64: 100}
	_, err = read(buildZip(t, entry{fh: mfh, data: mcomp, raw: true}, entry{name: "capsule.wasm", data: coreWasm}))
	errtest.WantToken(t, err, errs.InvalidArtifact, "murmur.yaml")
}

func TestPayloadCorrupt(t *testing.T) {
	t.Parallel()
	fh := &zip.FileHeader{Name: "capsule.wasm", Method: zip.Store, CRC32: crc32.ChecksumIEEE(coreWasm) ^ 1,
		CompressedSize64: uint64(len(coreWasm)), UncompressedSize64: uint64(len(coreWasm))}
	a, err := read(buildZip(t, manifestEntry(), entry{fh: fh, data: coreWasm, raw: true}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.ReadPayload()
	errtest.WantToken(t, err, errs.InvalidArtifact, "damaged")
}

func TestIsComponent(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   string
		want bool
	}{
		{"\x00asm\x0d\x00\x01\x00", true},
		{"\x00asm\x0d\x00\x01\x00more", true},
		{"\x00asm\x01\x00\x00\x00", false},
		{"\x00asm\x0d\x00\x00\x00", false},
		{"\x00asm\x0d\x00\x01", false},
		{"\x00ASM\x0d\x00\x01\x00", false},
		{"", false},
	} {
		if got := IsComponent([]byte(tt.in)); got != tt.want {
			t.Errorf("IsComponent(%q) = %v", tt.in, got)
		}
	}
}

func TestOpen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.mur.zip")
	os.WriteFile(good, buildZip(t, manifestEntry(), entry{name: "capsule.wasm", data: coreWasm}), 0o644)
	a, c, err := Open(good)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := a.ReadPayload(); err != nil || !bytes.Equal(b, coreWasm) {
		t.Errorf("ReadPayload = %q, %v", b, err)
	}
	c.Close()

	bad := filepath.Join(dir, "bad.mur.zip")
	os.WriteFile(bad, []byte("nope"), 0o644)
	_, _, err = Open(bad)
	errtest.WantToken(t, err, errs.InvalidArtifact, bad+": the packed artifact")
	if _, _, err := Open(filepath.Join(dir, "missing.mur.zip")); !errors.Is(err, errs.NotFound) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open(missing) = %v", err)
	}
	if _, _, err := Open(dir); !errors.Is(err, errs.InvalidArtifact) {
		t.Errorf("Open(dir) = %v", err)
	}
}

// TestReadLargeArtifactMemory: reading the manifest and locating the payload of a 100 MiB
// artifact must not cost memory in proportion to the payload, stored or deflated; neither must
// streaming it.
func TestReadLargeArtifactMemory(t *testing.T) {
	const payloadSize = 100 << 20
	for _, method := range []uint16{zip.Store, zip.Deflate} {
		t.Run(fmt.Sprint("method", method), func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "big.mur.zip")
			f, err := os.Create(p)
			if err != nil {
				t.Fatal(err)
			}
			zw := zip.NewWriter(f)
			zw.RegisterCompressor(zip.Deflate, func(w io.Writer) (io.WriteCloser, error) { return flate.NewWriter(w, flate.BestSpeed) })
			mw, _ := zw.Create("murmur.yaml")
			mw.Write(goodManifest)
			pw, err := zw.CreateHeader(&zip.FileHeader{Name: "capsule.wasm", Method: method})
			if err != nil {
				t.Fatal(err)
			}
			pw.Write(coreWasm)
			block := make([]byte, 1<<20)
			for i := range block {
				block[i] = byte(i * 7 % 251)
			}
			for written := len(coreWasm); written < payloadSize; written += len(block) {
				if _, err := pw.Write(block[:min(len(block), payloadSize-written)]); err != nil {
					t.Fatal(err)
				}
			}
			if err := zw.Close(); err != nil {
				t.Fatal(err)
			}
			f.Close()

			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			a, c, err := Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			runtime.ReadMemStats(&after)
			if a.PayloadSize != payloadSize {
				t.Errorf("PayloadSize = %d", a.PayloadSize)
			}
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 4<<20 {
				t.Errorf("Read of a 100 MiB artifact allocated %d bytes", grew)
			}
			runtime.ReadMemStats(&before)
			rc, err := a.OpenPayload()
			if err != nil {
				t.Fatal(err)
			}
			n, err := io.CopyBuffer(io.Discard, rc, make([]byte, 64<<10))
			rc.Close()
			runtime.ReadMemStats(&after)
			if err != nil || n != payloadSize {
				t.Fatalf("streamed %d bytes, %v", n, err)
			}
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 4<<20 {
				t.Errorf("streaming a 100 MiB payload allocated %d bytes", grew)
			}
		})
	}
}

func TestReadUnderInsecurePathGodebug(t *testing.T) {
	t.Setenv("GODEBUG", "zipinsecurepath=0")
	_, err := read(buildZip(t, manifestEntry(), entry{name: "capsule.wasm", data: coreWasm}, entry{name: "../evil", data: nil}))
	errtest.WantToken(t, err, errs.InvalidArtifact, `"../evil" that climbs out`)
}
