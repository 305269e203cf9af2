package stage

import (
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
	"github.com/murmur-nexus/mur/internal/bufpool"
)

// A stream told its blob's size holds it in buffers no larger than the blob (a small blob takes
// a few KiB from the heap's pools, not a megabyte of bufpool's slabs), and still vouches for it.
// Not parallel: it counts the process's lent buffers.
func TestStreamBuffersAreSizedToTheBlob(t *testing.T) {
	blob := artifacttest.Spec{Name: "tool", Version: "1.0.0", Wasm: artifacttest.Tagged("tool")}.Zip()
	a := readArchive(t, blob)
	for _, c := range []struct {
		expect int64
		lent   bool
	}{{int64(len(blob)), false}, {-1, true}} {
		s := NewStream(nil, streamName, digest.FromBytes(blob), nil)
		s.Expect(c.expect)
		base := bufpool.LentBytes()
		s.Write(blob)
		if lent := bufpool.LentBytes() > base; lent != c.lent {
			t.Errorf("a stream expecting %d bytes lent bufpool buffers for %d: %v; want %v", c.expect, len(blob), lent, c.lent)
		}
		if !s.Verified(a, int64(len(blob))) {
			t.Errorf("a stream expecting %d bytes did not vouch for the payload", c.expect)
		}
	}
}
