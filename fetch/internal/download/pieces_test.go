package download

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// gatedFirst serves ranges like memRanger, except that the body of the piece at byte 0 gives
// nothing until open is closed: the blob's first connection is still busy while the others end.
// asked is closed when the ranged request numbered at (from 1) is made.
type gatedFirst struct {
	*memRanger
	open  chan struct{}
	at    int64
	asked chan struct{}
}

func (g *gatedFirst) Open(ctx context.Context, off, end int64, validator string) (Part, error) {
	p, err := g.memRanger.Open(ctx, off, end, validator)
	if Ranged(off, end) && g.ranged.Load() == g.at {
		close(g.asked)
	}
	if err == nil && off == 0 {
		p.Body = &gatedBody{ReadCloser: p.Body, ctx: ctx, open: g.open}
	}
	return p, err
}

type gatedBody struct {
	io.ReadCloser
	ctx  context.Context
	open chan struct{}
}

func (b *gatedBody) Read(p []byte) (int, error) {
	select {
	case <-b.open:
	case <-b.ctx.Done():
		return 0, b.ctx.Err()
	}
	return b.ReadCloser.Read(p)
}

// An extra connection gives its job slot back as soon as it ends, not when the blob is done: a
// download waiting for a slot starts while the blob's first connection still brings its last
// piece. Once the fill ends, every slot it took is free.
func TestFillGivesAnExtraConnectionsSlotBackAsItEnds(t *testing.T) {
	data, d := blob(3 * 64 << 10) // three pieces: the first connection's, and two for the extra one
	r := &gatedFirst{memRanger: &memRanger{data: data, etag: `"a"`}, open: make(chan struct{}), at: 3, asked: make(chan struct{})}
	slots := NewSlots(2)
	own, err := slots.Take(context.Background(), SlotBytes) // the blob's own download holds one
	if err != nil {
		t.Fatal(err)
	}
	w := ingest(t, newStore(t), d, int64(len(data)))
	defer w.Close()
	f := New(w, d, int64(len(data)), "mem", Options{Connections: 2, ParallelMin: 1, Chunk: 64 << 10, Hooks: &Hooks{PiecesFirst: true}, Slots: slots}, nil)
	done := make(chan error, 1)
	go func() { done <- f.Fill(context.Background(), r) }()
	opened := false
	defer func() {
		if !opened {
			close(r.open)
			<-done
		}
	}()

	// The extra connection holds its slot from before its first piece to after its last: its
	// second request is made with the slot taken.
	select {
	case <-r.asked:
	case err := <-done:
		opened = true
		t.Fatalf("the fill ended (%v) before the extra connection asked for its second piece", err)
	}
	// A later download: it can only go on the slot the extra connection took. The timeout only
	// bounds a failure; the slot comes back as soon as that connection ends.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	later, err := slots.Take(ctx, SlotBytes)
	if err != nil {
		t.Fatalf("the extra connection ended but kept its job slot while the blob's first piece was still coming: %v", err)
	}
	if got := r.ranged.Load(); got != 3 {
		t.Fatalf("%d ranged requests before the first piece came, want 3 (the extra connection fetched the other two)", got)
	}
	close(r.open)
	opened = true
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if w.Digest() != d || f.Transfer().Conns != 2 {
		t.Fatalf("the ingest hashes to %s over %d connections, want %s over 2", w.Digest(), f.Transfer().Conns, d)
	}
	later()
	own()
	if !slots.sem.TryAcquire(2 * SlotBytes) {
		t.Fatal("a slot is still taken after the fill and every download ended")
	}
}

// otherETag serves ranges like memRanger, except that its ranged request numbered at (from 1)
// is answered with the same range of other bytes under another ETag, as a 206: a server behind
// a load balancer whose nodes hold two versions of the blob, and that ignores If-Range.
type otherETag struct {
	*memRanger
	other []byte
	at, n atomic.Int64
}

func (o *otherETag) Open(ctx context.Context, off, end int64, validator string) (Part, error) {
	if Ranged(off, end) && o.n.Add(1) == o.at.Load() {
		o.opens.Add(1)
		return Part{Body: o.body(off, o.other[off:end+1]), Validator: `"other"`}, nil
	}
	return o.memRanger.Open(ctx, off, end, validator)
}

// A piece that comes back under another ETag than the pieces before it is not written into the
// blob: the ranged attempt ends and the fill starts over as one stream, so that the ingest never
// holds bytes of two versions.
func TestFillNeverSplicesAPieceOfAnotherETag(t *testing.T) {
	data, d := blob(1 << 20)
	other := append([]byte(nil), data...)
	for i := range other {
		other[i] ^= 0xff
	}
	for _, at := range []int64{2, 5, 16} { // the first piece after the probe, one in the middle, the last
		t.Run(fmt.Sprint("request ", at), func(t *testing.T) {
			r := &otherETag{memRanger: &memRanger{data: data, etag: `"a"`}, other: other}
			r.at.Store(at)
			opt := Options{Connections: 4, ParallelMin: 1, Chunk: 64 << 10, Hooks: &Hooks{PiecesFirst: true}}
			f, err := fill(t, newStore(t), r, data, d, opt) // fails unless the ingest holds data
			if err != nil {
				t.Fatalf("fill: %v", err)
			}
			if r.n.Load() < at {
				t.Fatalf("only %d ranged requests: the piece of another ETag was never asked for", r.n.Load())
			}
			if notes := strings.Join(f.Transfer().Notes, "; "); !strings.Contains(notes, `another ETag ("other")`) || !strings.Contains(notes, "one stream") {
				t.Fatalf("notes %q, want the other ETag and the start over as one stream said", notes)
			}
		})
	}
}
