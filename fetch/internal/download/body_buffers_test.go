package download

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/internal/bufpool"
	"github.com/murmur-nexus/mur/internal/slowdown"
)

// bufferTaker is a bufferWriter that keeps every buffer it is given and hands back fresh ones,
// so a buffer reused after it was given would show as changed bytes.
type bufferTaker struct {
	got    [][]byte
	copied int // bytes that came through Write instead
}

func (b *bufferTaker) WriteBuffer(p *[]byte, n int) (*[]byte, error) {
	b.got = append(b.got, (*p)[:n])
	fresh := make([]byte, len(*p))
	return &fresh, nil
}

func (b *bufferTaker) Write(p []byte) (int, error) {
	b.copied += len(p)
	b.got = append(b.got, bytes.Clone(p))
	return len(p), nil
}

// The read-ahead hands each buffer it filled to a writer that takes buffers whole, never the
// same one twice and never copied, through the bound of CopyBounded.
func TestBodyHandsItsBuffersOver(t *testing.T) {
	data := make([]byte, 3*readAheadChunk+12345)
	for i := range data {
		data[i] = byte(i * 7)
	}
	dst := &bufferTaker{}
	n, err := CopyBounded(dst, NewBody(io.NopCloser(bytes.NewReader(data)), int64(len(data)), "blob x", nil), int64(len(data)))
	if err != nil || n != int64(len(data)) {
		t.Fatalf("copied %d bytes, %v", n, err)
	}
	if dst.copied != 0 || len(dst.got) != 4 {
		t.Fatalf("%d bytes copied through Write, %d buffers handed over; want 0 and 4", dst.copied, len(dst.got))
	}
	if !bytes.Equal(bytes.Join(dst.got, nil), data) {
		t.Fatal("the buffers handed over do not hold the body")
	}
}

// A body longer than the bound is cut at it: the buffer that crosses it is written as far as
// the bound, and the copy fails with ErrTooLong.
func TestBodyBoundCutsTheBufferThatCrossesIt(t *testing.T) {
	data := bytes.Repeat([]byte("x"), readAheadChunk+10)
	dst := &bufferTaker{}
	_, err := CopyBounded(dst, NewBody(io.NopCloser(bytes.NewReader(data)), -1, "blob x", nil), readAheadChunk+5)
	if err != ErrTooLong {
		t.Fatalf("err %v, want ErrTooLong", err)
	}
	if got := len(bytes.Join(dst.got, nil)); got != readAheadChunk+5 {
		t.Fatalf("%d bytes written, want the bound (%d)", got, readAheadChunk+5)
	}
}

// bodyRanger answers with a Body, as a registry's Ranger does, so a fill reads it ahead.
type bodyRanger struct{ *memRanger }

func (r bodyRanger) Open(ctx context.Context, off, end int64, validator string) (Part, error) {
	p, err := r.memRanger.Open(ctx, off, end, validator)
	if err == nil {
		p.Body = NewBody(p.Body, -1, "blob x", nil)
	}
	return p, err
}

type teeRecorder struct{ bytes.Buffer }

func (t *teeRecorder) Abandon() {}

// Into a real ingest, through the Filler's own writers, the buffers are taken whole and the blob
// and the tee get exactly the bytes sent, also across a break the fill continues after.
func TestFillIntoIngestWithoutCopies(t *testing.T) {
	for _, breakAt := range []int64{0, 2*cas.ChunkSize + 100} {
		data, d := blob(5*cas.ChunkSize + 777)
		r := &memRanger{data: data, etag: `"a"`, breakAt: breakAt}
		w := ingest(t, newStore(t), d, int64(len(data)))
		f := New(w, d, int64(len(data)), "mem", Options{Connections: 1}, nil)
		tee := &teeRecorder{}
		f.SetTee(tee)
		if err := f.Fill(context.Background(), bodyRanger{r}); err != nil {
			t.Fatal(err)
		}
		if w.Digest() != d || w.Size() != int64(len(data)) {
			t.Fatalf("break at %d: ingest %s (%d bytes), want %s (%d)", breakAt, w.Digest(), w.Size(), d, len(data))
		}
		if breakAt == 0 && !bytes.Equal(tee.Bytes(), data) {
			t.Fatalf("the tee got %d bytes that are not the blob's", tee.Len())
		}
		w.Close()
	}
}

// lentSettles waits until bufpool has every slab buffer back that was out at base: the reading
// goroutine gives its buffers back once WriteTo has returned.
func lentSettles(t *testing.T, base int64, what string) {
	t.Helper()
	deadline := time.Now().Add(slowdown.Scale(30 * time.Second))
	for bufpool.Lent() != base {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d buffers never came back to the pool", what, bufpool.Lent()-base)
		}
		time.Sleep(time.Millisecond)
	}
}

type failingWriter struct{ after int }

func (f *failingWriter) Write(p []byte) (int, error) {
	if f.after <= 0 {
		return 0, errors.New("disk full")
	}
	f.after--
	return len(p), nil
}

// Every read-ahead buffer goes back to the pool, whether the copy ends well, the writer fails,
// the body breaks off or runs past its bound, or the ingest takes buffers whole: bufpool's
// memory is not the collector's to reclaim.
func TestBodyGivesEveryBufferBack(t *testing.T) {
	data := bytes.Repeat([]byte("m"), 3*readAheadChunk+99)
	body := func() *Body { return NewBody(io.NopCloser(bytes.NewReader(data)), int64(len(data)), "blob x", nil) }
	broken := func() *Body {
		return NewBody(io.NopCloser(io.MultiReader(bytes.NewReader(data[:readAheadChunk+5]), errReader{})), int64(len(data)), "blob x", nil)
	}
	_, d := blob(1) // any digest: the ingest is only written to
	for _, c := range []struct {
		name string
		run  func() error
	}{
		{"a whole copy", func() error { _, err := CopyBounded(io.Discard, body(), -1); return err }},
		{"a writer that fails", func() error { _, err := CopyBounded(&failingWriter{after: 1}, body(), -1); return err }},
		{"a body that breaks off", func() error { _, err := CopyBounded(io.Discard, broken(), -1); return err }},
		{"a body past its bound", func() error { _, err := CopyBounded(io.Discard, body(), readAheadChunk); return err }},
		{"an ingest that takes buffers whole", func() error {
			w := ingest(t, newStore(t), d, int64(len(data)))
			defer w.Close()
			_, err := CopyBounded(&limitedWriter{w: w, left: int64(len(data))}, body(), -1)
			return err
		}},
	} {
		base := bufpool.Lent()
		err := c.run()
		if (c.name == "a whole copy" || c.name == "an ingest that takes buffers whole") != (err == nil) {
			t.Errorf("%s: %v", c.name, err)
		}
		lentSettles(t, base, c.name)
	}
}
