package stage

import (
	"bytes"
	"crypto/sha256"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/zip"
	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/internal/artifact"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
	"github.com/murmur-nexus/mur/internal/ref"
)

var streamName = ref.Name{Scope: "acme", Name: "tool"}

// feed writes blob[from:] to s in pieces of random sizes, as a download would.
func feed(s *Stream, blob []byte, from int) {
	r := rand.New(rand.NewPCG(1, 2))
	for p := blob[from:]; len(p) > 0; {
		n := min(len(p), 1+r.IntN(3<<20))
		s.Write(p[:n])
		p = p[n:]
	}
}

func readArchive(t *testing.T, blob []byte) *artifact.Archive {
	t.Helper()
	a, err := artifact.Read(bytes.NewReader(blob), int64(len(blob)))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// storedZip packs wasm uncompressed, with its sizes in the local header (no data descriptor), as
// other zip tools write a stored entry.
func storedZip(t *testing.T, wasm []byte) []byte {
	t.Helper()
	spec := artifacttest.Spec{Name: "tool", Version: "1.0.0", Wasm: wasm}
	return spec.Lying(true, crc32Of(wasm), uint64(len(wasm)))
}

func crc32Of(b []byte) uint32 {
	a := artifacttest.Spec{Name: "x", Version: "1.0.0", Wasm: b}.Zip()
	zr, _ := zip.NewReader(bytes.NewReader(a), int64(len(a)))
	for _, f := range zr.File {
		if f.Name == "capsule.wasm" {
			return f.CRC32
		}
	}
	return 0
}

// TestStreamStageFollowsTheDownload stages a deflated, a stored and a zstd payload from the
// bytes of a download, and feeds the compiled cache's key the payload on the way.
func TestStreamStageFollowsTheDownload(t *testing.T) {
	wasm := artifacttest.Module(3<<20, 7)
	for _, c := range []struct {
		name string
		blob []byte
	}{
		{"deflated", artifacttest.Zip("tool", "1.0.0", wasm)},
		{"stored", storedZip(t, wasm)},
		// As `mur pack --compression zstd` writes it: the sizes only in the data descriptor, so
		// the stream finds the entry's end by its frames.
		{"zstd", artifacttest.Spec{Name: "tool", Version: "1.0.0", Wasm: wasm, Compression: artifact.Zstd}.Zip()},
		// As other zip tools write it: the sizes in the local header.
		{"zstd-sized", artifacttest.Spec{Name: "tool", Version: "1.0.0", Wasm: wasm}.Raw(artifact.MethodZstd,
			artifacttest.Compress(artifact.MethodZstd, wasm), crc32.ChecksumIEEE(wasm), uint64(len(wasm)))},
	} {
		t.Run(c.name, func(t *testing.T) {
			proj := Tools{Project: t.TempDir()}
			key := sha256.New()
			s := NewStream(&proj, streamName, digest.FromBytes(c.blob), key)
			feed(s, c.blob, 0)
			st := s.Adopt(readArchive(t, c.blob), int64(len(c.blob)))
			if st == nil {
				t.Fatal("the stream was not adopted")
			}
			defer st.Discard()
			got, err := os.ReadFile(filepath.Join(st.tmp, "capsule.wasm"))
			if err != nil || !bytes.Equal(got, wasm) {
				t.Fatalf("staged payload differs (%d bytes, %v)", len(got), err)
			}
			if want := sha256.Sum256(wasm); !bytes.Equal(key.Sum(nil), want[:]) {
				t.Error("the key was not fed the payload")
			}
			if _, err := os.Stat(StagedDir(proj, streamName)); !os.IsNotExist(err) {
				t.Errorf("the staged folder is visible before install: %v", err)
			}
			if _, err := st.Install(); err != nil {
				t.Fatal(err)
			}
			if err := CheckStaged(proj, streamName, digest.FromBytes(c.blob)); err != nil {
				t.Fatal(err)
			}
			// With no project the same stream is checked, written nowhere, and fed the key.
			key.Reset()
			check := NewStream(nil, streamName, digest.FromBytes(c.blob), key)
			feed(check, c.blob, 0)
			if !check.Verified(readArchive(t, c.blob), int64(len(c.blob))) {
				t.Fatal("a check-only stream did not vouch for a good payload")
			}
			if want := sha256.Sum256(wasm); !bytes.Equal(key.Sum(nil), want[:]) {
				t.Error("the check-only stream did not feed the key the payload")
			}
		})
	}
}

// TestStreamStageFallsBack covers what the stream must not adopt: a stream that did not start at
// the blob's first byte (an ingest resumed from a kept prefix), a payload that is not the first
// wasm entry, and a payload whose CRC-32 or size is not what the zip records. Each leaves no
// folder behind.
func TestStreamStageFallsBack(t *testing.T) {
	wasm := artifacttest.Module(64<<10, 3)
	good := artifacttest.Zip("tool", "1.0.0", wasm)
	twoWasm := func() []byte {
		var b bytes.Buffer
		zw := zip.NewWriter(&b)
		for _, e := range []struct {
			name string
			data []byte
		}{{"murmur.yaml", []byte("name: tool\nversion: \"1.0.0\"\n")}, {"other.wasm", []byte(artifacttest.EmptyModule)}, {"capsule.wasm", wasm}} {
			w, _ := zw.Create(e.name)
			w.Write(e.data)
		}
		zw.Close()
		return b.Bytes()
	}()
	spec := artifacttest.Spec{Name: "tool", Version: "1.0.0", Wasm: wasm}
	zstdSpec := spec
	zstdSpec.Compression = artifact.Zstd
	zstdBody := artifacttest.Compress(artifact.MethodZstd, wasm)
	flipped := damagedZstd(wasm)
	for _, c := range []struct {
		name  string
		blob  []byte
		from  int
		extra int64 // bytes the ingest holds beyond what the stream saw
	}{
		{"resumed", good, 100, 0},
		{"ingest-saw-more", good, 0, 1},
		{"payload-not-first-wasm", twoWasm, 0, 0},
		{"wrong-crc", spec.Lying(false, 0x1234, uint64(len(wasm))), 0, 0},
		{"wrong-size", spec.Lying(false, crc32Of(wasm), uint64(len(wasm)-1)), 0, 0},
		{"stored-wrong-crc", spec.Lying(true, 0x1234, uint64(len(wasm))), 0, 0},
		{"zstd-resumed", zstdSpec.Zip(), 100, 0},
		{"zstd-wrong-crc", spec.Raw(artifact.MethodZstd, zstdBody, 0x1234, uint64(len(wasm))), 0, 0},
		{"zstd-frame-larger-than-declared", spec.Raw(artifact.MethodZstd, zstdBody, crc32.ChecksumIEEE(wasm), uint64(len(wasm)-1)), 0, 0},
		{"zstd-shorter-than-declared", spec.Raw(artifact.MethodZstd, zstdBody, crc32.ChecksumIEEE(wasm), uint64(len(wasm)+1)), 0, 0},
		{"zstd-bad-frame", spec.Raw(artifact.MethodZstd, flipped, crc32.ChecksumIEEE(wasm), uint64(len(wasm))), 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			proj := Tools{Project: t.TempDir()}
			s := NewStream(&proj, streamName, digest.FromBytes(c.blob), nil)
			feed(s, c.blob, c.from)
			a, err := artifact.Read(bytes.NewReader(c.blob), int64(len(c.blob)))
			if err != nil {
				t.Fatal(err)
			}
			if st := s.Adopt(a, int64(len(c.blob))+c.extra); st != nil {
				st.Discard()
				t.Fatal("adopted")
			}
			// Followed only to be checked (no project), it does not vouch for the payload either.
			check := NewStream(nil, streamName, digest.FromBytes(c.blob), nil)
			feed(check, c.blob, c.from)
			if check.Verified(a, int64(len(c.blob))+c.extra) {
				t.Fatal("a check-only stream vouched for it")
			}
			if _, err := os.Stat(proj.Dir()); !os.IsNotExist(err) {
				t.Errorf("tools/ left behind: %v", err)
			}
		})
	}
}

// damagedZstd is wasm as two zstd frames, the second with a byte flipped: reading the artifact
// (which decodes the payload's first bytes) takes it, and only decoding it to its end can tell.
func damagedZstd(wasm []byte) []byte {
	second := artifacttest.Compress(artifact.MethodZstd, wasm[4096:])
	second[len(second)/2] ^= 0x55
	return append(artifacttest.Compress(artifact.MethodZstd, wasm[:4096]), second...)
}

// bytesBlob is a blob held in memory, as the CAS opens one.
type bytesBlob struct{ *bytes.Reader }

func (bytesBlob) Close() error { return nil }

func blobReader(b []byte) bytesBlob { return bytesBlob{bytes.NewReader(b)} }

// A damaged zstd payload the stream could not vouch for is refused when it is read back from the
// blob, with invalid-artifact naming the payload, and leaves nothing staged.
func TestZstdDamagedIsRefusedFromTheBlob(t *testing.T) {
	wasm := artifacttest.Module(256<<10, 4)
	spec := artifacttest.Spec{Name: "tool", Version: "1.0.0", Wasm: wasm}
	body := artifacttest.Compress(artifact.MethodZstd, wasm)
	crc := crc32.ChecksumIEEE(wasm)
	for name, c := range map[string]struct {
		blob    []byte
		mention string
	}{
		"bad frame":                  {spec.Raw(artifact.MethodZstd, damagedZstd(wasm), crc, uint64(len(wasm))), "damaged"},
		"wrong CRC":                  {spec.Raw(artifact.MethodZstd, body, crc^1, uint64(len(wasm))), "checksum"},
		"frame larger than declared": {spec.Raw(artifact.MethodZstd, body, crc, uint64(len(wasm)-1)), "past the"},
	} {
		t.Run(name, func(t *testing.T) {
			a := readArchive(t, c.blob)
			errtest.WantToken(t, CheckPayload(a, nil), errs.InvalidArtifact, `payload "capsule.wasm"`, c.mention)
			proj := Tools{Project: t.TempDir()}
			st, err := Prepare(proj, streamName, digest.FromBytes(c.blob), a, blobReader(c.blob), nil)
			if st != nil {
				st.Discard()
			}
			errtest.WantToken(t, err, errs.InvalidArtifact, `payload "capsule.wasm"`, c.mention)
			if ents, _ := os.ReadDir(filepath.Join(proj.Dir(), streamName.Scope)); len(ents) != 0 {
				t.Errorf("a refused payload left %v", ents)
			}
		})
	}
}

// TestStreamStageAbandonMidway stops a download halfway: nothing stays, and a writer still
// sending is never blocked.
func TestStreamStageAbandonMidway(t *testing.T) {
	blob := artifacttest.Zip("tool", "1.0.0", artifacttest.Module(6<<20, 9))
	proj := Tools{Project: t.TempDir()}
	s := NewStream(&proj, streamName, digest.FromBytes(blob), nil)
	feed(s, blob[:len(blob)/2], 0)
	s.abandon()
	s.Write(blob[len(blob)/2:]) // after abandon: counted, not sent
	s.abandon()
	if _, err := os.Stat(proj.Dir()); !os.IsNotExist(err) {
		t.Errorf("tools/ left behind: %v", err)
	}
}
