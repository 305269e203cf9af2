package stage

import (
	stdzip "archive/zip"
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"os"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/internal/artifact"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
)

// forgeCRC returns data with its last four bytes replaced so that its CRC-32 is target. CRC-32
// is affine over GF(2) in its input bits, so the four bytes solve a 32×32 linear system.
func forgeCRC(data []byte, target uint32) []byte {
	out := append([]byte(nil), data...)
	n := len(out) - 4
	crcWith := func(x uint32) uint32 {
		binary.LittleEndian.PutUint32(out[n:], x)
		return crc32.ChecksumIEEE(out)
	}
	base := crcWith(0)
	// rows[i] is (column of bit i, bit i itself), eliminated Gauss-Jordan style.
	type row struct{ col, x uint32 }
	var rows []row
	for i := range 32 {
		rows = append(rows, row{crcWith(1<<i) ^ base, 1 << i})
	}
	want := target ^ base
	var x uint32
	for bit := 31; bit >= 0; bit-- {
		m := uint32(1) << bit
		p := -1
		for i := range rows {
			if rows[i].col&m != 0 {
				p = i
				break
			}
		}
		if p < 0 {
			continue
		}
		pr := rows[p]
		rows = append(rows[:p], rows[p+1:]...)
		for i := range rows {
			if rows[i].col&m != 0 {
				rows[i].col ^= pr.col
				rows[i].x ^= pr.x
			}
		}
		if want&m != 0 {
			want ^= pr.col
			x ^= pr.x
		}
	}
	crcWith(x)
	return out
}

// hiddenEntryZip is the stored-payload zip of wasm with a local entry of the same name, size and
// CRC-32 but other bytes planted before its first entry, which its central directory never
// lists: a reader that follows local headers meets the planted one first.
func hiddenEntryZip(t *testing.T, wasm []byte) (blob, planted []byte) {
	t.Helper()
	real := storedZip(t, wasm)
	planted = forgeCRC(bytes.Repeat([]byte("\x00asm-planted"), len(wasm)/12+1)[:len(wasm)], crc32.ChecksumIEEE(wasm))
	var hidden bytes.Buffer
	hz := stdzip.NewWriter(&hidden)
	w, err := hz.CreateRaw(&stdzip.FileHeader{Name: "capsule.wasm", Method: stdzip.Store, CRC32: crc32.ChecksumIEEE(planted),
		CompressedSize64: uint64(len(planted)), UncompressedSize64: uint64(len(planted))})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(planted)
	hz.Flush()
	entry := hidden.Bytes()[:30+len("capsule.wasm")+len(planted)]

	var out bytes.Buffer
	out.Write(entry)
	zw := stdzip.NewWriter(&out)
	zw.SetOffset(int64(len(entry)))
	zr, err := stdzip.NewReader(bytes.NewReader(real), int64(len(real)))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range zr.File {
		if err := zw.Copy(f); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes(), planted
}

// A local entry the central directory does not list, planted before the real ones with the
// payload's name, size and CRC-32, is never what the stream stages into tools/: only the entry at
// the offset the directory records is (issue 22, item 17).
func TestStreamStageRefusesAHiddenEntry(t *testing.T) {
	wasm := artifacttest.Module(64<<10, 5)
	blob, planted := hiddenEntryZip(t, wasm)
	a, err := artifact.Read(bytes.NewReader(blob), int64(len(blob)))
	if err != nil {
		t.Skipf("the artifact reader refuses the zip itself, which is as safe: %v", err)
	}
	if crc32.ChecksumIEEE(planted) != crc32.ChecksumIEEE(wasm) || len(planted) != len(wasm) || bytes.Equal(planted, wasm) {
		t.Fatal("the planted entry does not pass for the payload: the test proves nothing")
	}
	proj := Tools{Project: t.TempDir()}
	s := NewStream(&proj, streamName, digest.FromBytes(blob), nil)
	feed(s, blob, 0)
	if st := s.Adopt(a, int64(len(blob))); st != nil {
		b, _ := os.ReadFile(st.tmp + "/capsule.wasm")
		st.Discard()
		t.Fatalf("adopted the stream's staging (planted bytes: %v)", bytes.Equal(b, planted))
	}
	if _, err := os.Stat(proj.Dir()); !os.IsNotExist(err) {
		t.Errorf("tools/ left behind: %v", err)
	}
}
