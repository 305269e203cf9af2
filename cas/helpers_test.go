package cas

import (
	"crypto/sha256"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/opencontainers/go-digest"
)

const patternBlock = 64 << 10

// patternReader yields size deterministic pseudo-random bytes for seed, cheaply enough to stream
// gigabytes: one random block, with its position stamped into each repetition so that no two
// blocks of a stream, and no two seeds, are alike.
type patternReader struct {
	block []byte
	seed  uint64
	size  int64
	off   int64
}

func newPattern(seed uint64, size int64) *patternReader {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	block := make([]byte, patternBlock)
	rand.NewChaCha8(key).Read(block)
	return &patternReader{block: block, seed: seed, size: size}
}

func (r *patternReader) Read(p []byte) (int, error) {
	if r.off >= r.size {
		return 0, io.EOF
	}
	if int64(len(p)) > r.size-r.off {
		p = p[:r.size-r.off]
	}
	n := 0
	for n < len(p) {
		in := int(r.off % patternBlock)
		m := copy(p[n:], r.block[in:])
		if in == 0 && m >= 8 {
			binary.LittleEndian.PutUint64(p[n:], uint64(r.off/patternBlock)^r.seed<<32)
		}
		n += m
		r.off += int64(m)
	}
	return n, nil
}

func patternBytes(seed uint64, size int64) []byte {
	b, _ := io.ReadAll(newPattern(seed, size))
	return b
}

func patternDigest(seed uint64, size int64) digest.Digest {
	h := sha256.New()
	io.Copy(h, newPattern(seed, size))
	return digest.NewDigest(digest.SHA256, h)
}

func openStore(t testing.TB) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "cas"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// dirNames lists a folder, failing the test when it can't.
func dirNames(t testing.TB, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// skipOrFail skips a test that the machine can't run, except in CI, where the skip would hide a
// missing capability that CI is expected to have.
func skipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true and this test can't run: "+format, args...)
	}
	t.Skipf(format, args...)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
