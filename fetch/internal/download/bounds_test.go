package download

import (
	"context"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/internal/errs"
)

// A blob whose retry budget is spent is not continued after a break: the break is the error.
func TestFillRetriesAreBoundedInCount(t *testing.T) {
	data, d := blob(300_000)
	r := &memRanger{data: data, etag: `"a"`, breakAt: 100_000}
	store := newStore(t)
	w := ingest(t, store, d, int64(len(data)))
	defer w.Close()
	f := New(w, d, int64(len(data)), "mem", Options{}, nil)
	f.retries = maxRetries
	if err := f.Fill(context.Background(), r); errs.TokenOf(err) != errs.Network || r.opens.Load() != 1 {
		t.Fatalf("error %v after %d requests; want the break, after 1", err, r.opens.Load())
	}
}

// No retry once retryWindow has passed without a byte: a server that only ever answers wrongly is
// given up on rather than asked again.
func TestFillRetriesAreBoundedInTime(t *testing.T) {
	data, d := blob(300_000)
	r := &memRanger{data: data, etag: `"a"`, refuseAll: true}
	store := newStore(t)
	w := ingest(t, store, d, int64(len(data)))
	defer w.Close()
	f := New(w, d, int64(len(data)), "mem", Options{Connections: 4, ParallelMin: 1, Chunk: 64 << 10, Hooks: &Hooks{PiecesFirst: true}}, nil)
	f.began = time.Now().Add(-retryWindow - time.Second)
	if err := f.Fill(context.Background(), r); errs.TokenOf(err) != errs.Integrity || r.opens.Load() != 1 {
		t.Fatalf("error %v after %d requests; want integrity after 1", err, r.opens.Load())
	}
}

// A server that refuses ranges and then the whole blob too gets the ranged attempt and one
// stream, then the blob fails with integrity naming it.
func TestFillFallsBackToOneStreamOnce(t *testing.T) {
	data, d := blob(300_000)
	r := &refuseEverything{}
	store := newStore(t)
	w := ingest(t, store, d, int64(len(data)))
	defer w.Close()
	f := New(w, d, int64(len(data)), "mem", Options{Connections: 4, ParallelMin: 1, Chunk: 64 << 10}, nil)
	err := f.Fill(context.Background(), r)
	if errs.TokenOf(err) != errs.Integrity || r.opens != 2 {
		t.Fatalf("error %v after %d requests; want integrity after 2", err, r.opens)
	}
}

type refuseEverything struct{ opens int }

func (r *refuseEverything) Open(ctx context.Context, off, end int64, validator string) (Part, error) {
	r.opens++
	if r.opens > 100 {
		return Part{}, errs.New(errs.Network, "a fill that loops ends here, and its test fails on the count")
	}
	return Part{}, errs.Wrap(ErrNoRanges, errs.Network, "HTTP 416")
}
