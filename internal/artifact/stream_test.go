package artifact

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
	"io/fs"
	"math/rand/v2"
	"testing"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/zip"

	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
)

// checkStream reads z and checks it as one stream, the way an admission (a pull, a cache import) does.
func checkStream(t *testing.T, z []byte) error {
	t.Helper()
	a, err := read(z)
	if err != nil {
		t.Fatalf("Read refused what only streaming can tell: %v", err)
	}
	return a.CheckStream(bytes.NewReader(z))
}

// bigWasm is a core module padded past several stream buffers; compressible says whether
// deflate can shrink it (real code) or has to store it in stored blocks (random bytes).
func bigWasm(compressible bool) []byte {
	b := append([]byte(nil), coreWasm...)
	r := rand.New(rand.NewPCG(1, 2))
	for len(b) < 3*StreamBuffer+12345 {
		if compressible {
			b = append(b, "func main() { println(\"hello\") }\n"[r.IntN(8):]...)
		} else {
			b = append(b, byte(r.Uint32()))
		}
	}
	return b
}

func TestCheckStreamGood(t *testing.T) {
	t.Parallel()
	for name, payload := range map[string]entry{
		"deflated":              {name: "capsule.wasm", data: coreWasm},
		"stored":                {fh: &zip.FileHeader{Name: "capsule.wasm", Method: zip.Store}, data: coreWasm},
		"large random deflated": {name: "capsule.wasm", data: bigWasm(false)},
		"large text deflated":   {name: "capsule.wasm", data: bigWasm(true)},
		"large stored":          {fh: &zip.FileHeader{Name: "capsule.wasm", Method: zip.Store}, data: bigWasm(false)},
	} {
		t.Run(name, func(t *testing.T) {
			z := buildZip(t, manifestEntry(), entry{name: "docs/", mode: fs.ModeDir | 0o755}, entry{name: "docs/README.md", data: []byte("hi")},
				payload, entry{name: "sub/x.wasm", data: bigWasm(true)[:5000]})
			if err := checkStream(t, z); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// lying writes data as a raw entry whose header records crc, size and compressed size as given.
func lying(name string, method uint16, data []byte, crc uint32, size, csize int) entry {
	body := data
	if method == zip.Deflate {
		var buf bytes.Buffer
		fw, _ := flate.NewWriter(&buf, flate.DefaultCompression)
		fw.Write(data)
		fw.Close()
		body = buf.Bytes()
	}
	if csize < 0 {
		csize = len(body)
	}
	return entry{fh: &zip.FileHeader{Name: name, Method: method, CRC32: crc, UncompressedSize64: uint64(size), CompressedSize64: uint64(csize)}, data: body, raw: true}
}

// Every entry is held to its zip's record, the payload and the entries mur never reads alike;
// what fails is named.
func TestCheckStreamRefusals(t *testing.T) {
	t.Parallel()
	big := bigWasm(true)
	crcBig := crc32.ChecksumIEEE(big)
	readme := []byte("read me")
	for name, c := range map[string]struct {
		entries  []entry
		mentions []string
	}{
		"stored payload with a wrong CRC": {[]entry{manifestEntry(), lying("capsule.wasm", zip.Store, big, crcBig^1, len(big), -1)},
			[]string{`payload "capsule.wasm"`, "checksum", "report it"}},
		"deflated payload with a wrong CRC": {[]entry{manifestEntry(), lying("capsule.wasm", zip.Deflate, big, crcBig^1, len(big), -1)},
			[]string{`payload "capsule.wasm"`, "checksum"}},
		"a payload shorter than recorded": {[]entry{manifestEntry(), lying("capsule.wasm", zip.Deflate, big, crcBig, len(big)+1, -1)},
			[]string{`payload "capsule.wasm"`, "but the zip records"}},
		"a payload that inflates past its record": {[]entry{manifestEntry(), lying("capsule.wasm", zip.Deflate, big, crcBig, 1000, -1)},
			[]string{`payload "capsule.wasm"`, "inflates past the 1000 bytes"}},
		"a deflate stream longer than recorded": {[]entry{manifestEntry(), lying("capsule.wasm", zip.Deflate, big, crcBig, len(big), 100)},
			[]string{`payload "capsule.wasm"`, "deflate stream"}},
		"an entry mur never reads, with a wrong CRC": {[]entry{manifestEntry(), lying("docs/README.md", zip.Deflate, readme, crc32.ChecksumIEEE(readme)+1, len(readme), -1), {name: "capsule.wasm", data: coreWasm}},
			[]string{`entry "docs/README.md"`, "checksum"}},
		"a manifest with a wrong CRC": {[]entry{lying("murmur.yaml", zip.Store, goodManifest, 0, len(goodManifest), -1), {name: "capsule.wasm", data: coreWasm}},
			[]string{`entry "murmur.yaml"`, "checksum crc32:"}},
	} {
		t.Run(name, func(t *testing.T) {
			errtest.WantToken(t, checkStream(t, buildZip(t, c.entries...)), errs.InvalidArtifact, c.mentions...)
		})
	}
}

// A stream that ends before the last entry's data does (the file changed under the reader) is
// refused, not taken for a short entry.
func TestCheckStreamCut(t *testing.T) {
	t.Parallel()
	z := buildZip(t, manifestEntry(), entry{fh: &zip.FileHeader{Name: "capsule.wasm", Method: zip.Store}, data: bigWasm(false)})
	a, err := read(z)
	if err != nil {
		t.Fatal(err)
	}
	errtest.WantToken(t, a.CheckStream(io.LimitReader(bytes.NewReader(z), int64(len(z)/2))), errs.InvalidArtifact, `payload "capsule.wasm"`, "to its end")
}

// Two entries whose central records point at the same data are refused: that is how a small zip
// inflates without bound, and no archiver writes it.
func TestCheckStreamOverlap(t *testing.T) {
	t.Parallel()
	z := buildZip(t, manifestEntry(), entry{name: "capsule.wasm", data: coreWasm}, entry{name: "copy.bin", data: coreWasm})
	// Point the last central record at the payload's local header.
	var offsets []int
	for i := 0; i+4 <= len(z); i++ {
		if binary.LittleEndian.Uint32(z[i:]) == 0x02014b50 {
			offsets = append(offsets, i)
		}
	}
	if len(offsets) != 3 {
		t.Fatalf("found %d central records, want 3", len(offsets))
	}
	payloadAt := binary.LittleEndian.Uint32(z[offsets[1]+42:])
	binary.LittleEndian.PutUint32(z[offsets[2]+42:], payloadAt)
	errtest.WantToken(t, checkStream(t, z), errs.InvalidArtifact, `"capsule.wasm"`, `"copy.bin"`, "share bytes")
}
