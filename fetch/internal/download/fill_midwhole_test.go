package download

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
)

// midWhole serves ranges like memRanger, except that its at-th ranged request (counting from 1)
// is answered with the whole blob, as a server whose cache dropped the range support would.
type midWhole struct {
	*memRanger
	at, n atomic.Int64
}

func (m *midWhole) Open(ctx context.Context, off, end int64, validator string) (Part, error) {
	if Ranged(off, end) && m.n.Add(1) == m.at.Load() {
		m.opens.Add(1)
		return Part{Body: m.body(0, m.data), Whole: true, Validator: m.etag}, nil
	}
	return m.memRanger.Open(ctx, off, end, validator)
}

// A whole-blob 200 to a range in the middle of a parallel download ends the ranged attempt: the
// fill starts over as one stream and stores the right bytes, instead of writing the blob's first
// bytes at the piece's offset and failing with a false integrity error (issue 22, item 13).
func TestFillStartsOverWhenAPieceInTheMiddleComesBackWhole(t *testing.T) {
	data, d := blob(1 << 20)
	r := &midWhole{memRanger: &memRanger{data: data, etag: `"a"`}}
	r.at.Store(5)
	opt := Options{Connections: 4, ParallelMin: 1, Chunk: 64 << 10, Hooks: &Hooks{PiecesFirst: true}}
	f, err := fill(t, newStore(t), r, data, d, opt)
	if err != nil {
		t.Fatalf("fill: %v", err)
	}
	if r.n.Load() < 5 {
		t.Fatalf("only %d ranged requests: the whole answer never came mid-download", r.n.Load())
	}
	if notes := strings.Join(f.Transfer().Notes, "; "); !strings.Contains(notes, "one stream") {
		t.Fatalf("notes %q, want the fall back to one stream said", notes)
	}
}
