package download

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/internal/errs"
)

// memRanger serves a blob from memory the way a server that honours Range does, and can be made
// to misbehave the ways servers do. Engine tests need no HTTP, no store and no pull.
type memRanger struct {
	data      []byte
	etag      string
	whole     bool  // ignore Range: answer every request with the whole blob
	breakAt   int64 // a body crossing this offset breaks off there, once; 0: never
	refuseAll bool  // answer every ranged request with ErrNoRanges
	// noRangesAfter, when set, answers ranged requests with ErrNoRanges once that many were
	// served: a server that stops serving ranges mid-transfer.
	noRangesAfter int64
	mu            sync.Mutex
	broke         bool
	opens         atomic.Int64
	ranged        atomic.Int64
	maxLive       atomic.Int64
	live          atomic.Int64
}

func (m *memRanger) Open(ctx context.Context, off, end int64, validator string) (Part, error) {
	m.opens.Add(1)
	ranged := Ranged(off, end)
	if ranged {
		m.ranged.Add(1)
	}
	if ranged && (m.refuseAll || m.noRangesAfter > 0 && m.ranged.Load() > m.noRangesAfter) {
		return Part{}, errs.Wrap(fmt.Errorf("%w: refused", ErrNoRanges), errs.Network, "refused")
	}
	if !ranged || m.whole || (validator != "" && validator != m.etag) {
		off, end = 0, int64(len(m.data))-1
		return Part{Body: m.body(0, m.data), Whole: true, Validator: m.etag}, nil
	}
	if end >= int64(len(m.data)) {
		end = int64(len(m.data)) - 1
	}
	return Part{Body: m.body(off, m.data[off:end+1]), Validator: m.etag}, nil
}

// body is b, starting at off of the blob, broken off at breakAt the first time one crosses it.
func (m *memRanger) body(off int64, b []byte) io.ReadCloser {
	n := m.live.Add(1)
	for {
		old := m.maxLive.Load()
		if n <= old || m.maxLive.CompareAndSwap(old, n) {
			break
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.breakAt > off && m.breakAt < off+int64(len(b)) && !m.broke {
		m.broke = true
		return &liveBody{m: m, r: io.MultiReader(bytes.NewReader(b[:m.breakAt-off]), errReader{})}
	}
	return &liveBody{m: m, r: bytes.NewReader(b)}
}

type liveBody struct {
	m    *memRanger
	r    io.Reader
	once sync.Once
}

func (l *liveBody) Read(p []byte) (int, error) { return l.r.Read(p) }
func (l *liveBody) Close() error {
	l.once.Do(func() { l.m.live.Add(-1) })
	return nil
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) {
	return 0, errs.Wrap(io.ErrUnexpectedEOF, errs.Network, "the connection broke")
}

func blob(n int) ([]byte, digest.Digest) {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(1, uint64(n)))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b, digest.FromBytes(b)
}

func ingest(t *testing.T, store *cas.Store, d digest.Digest, size int64) *cas.Writer {
	t.Helper()
	w, err := store.OpenResumable(context.Background(), cas.ResumeInfo{Digest: d, Size: size, Store: "mem"})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func newStore(t *testing.T) *cas.Store {
	t.Helper()
	s, err := cas.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fill fetches data from r into a fresh ingest and checks that the ingest holds exactly data.
func fill(t *testing.T, store *cas.Store, r Ranger, data []byte, d digest.Digest, opt Options) (*Filler, error) {
	t.Helper()
	w := ingest(t, store, d, int64(len(data)))
	defer w.Close()
	f := New(w, d, int64(len(data)), "mem", opt, nil)
	err := f.Fill(context.Background(), r)
	if err == nil && (w.Digest() != d || w.Size() != int64(len(data))) {
		t.Fatalf("the ingest holds %d bytes hashing to %s, want %d and %s", w.Size(), w.Digest(), len(data), d)
	}
	return f, err
}

func TestFillStreamsASmallBlobInOneAnswer(t *testing.T) {
	data, d := blob(300_000)
	r := &memRanger{data: data, etag: `"a"`}
	f, err := fill(t, newStore(t), r, data, d, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.opens.Load() != 1 || r.ranged.Load() != 0 || f.Transfer().Bytes != int64(len(data)) || f.Transfer().Conns != 1 {
		t.Fatalf("opens %d (ranged %d), transfer %+v", r.opens.Load(), r.ranged.Load(), f.Transfer())
	}
}

// A body that breaks off mid-transfer is continued with a Range request, not failed.
func TestFillContinuesABrokenStream(t *testing.T) {
	data, d := blob(300_000)
	r := &memRanger{data: data, etag: `"a"`, breakAt: 100_000}
	f, err := fill(t, newStore(t), r, data, d, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.opens.Load() != 2 || r.ranged.Load() != 1 || f.Transfer().Bytes != int64(len(data)) {
		t.Fatalf("opens %d (ranged %d), transfer %+v", r.opens.Load(), r.ranged.Load(), f.Transfer())
	}
}

// Pieces over several connections: at most Connections at once, and every byte in place.
func TestFillInPiecesBoundsItsConnections(t *testing.T) {
	data, d := blob(1_000_000)
	r := &memRanger{data: data, etag: `"a"`}
	opt := Options{Connections: 3, ParallelMin: 1, Chunk: 64 << 10, Hooks: &Hooks{PiecesFirst: true}}
	f, err := fill(t, newStore(t), r, data, d, opt)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64((len(data) + 64<<10 - 1) / (64 << 10)); r.ranged.Load() != want {
		t.Fatalf("%d ranged requests, want one per piece (%d)", r.ranged.Load(), want)
	}
	if r.maxLive.Load() > 3 || f.Transfer().Conns > 3 || f.Transfer().Conns < 1 {
		t.Fatalf("%d answers open at once, %d connections reported; want at most 3", r.maxLive.Load(), f.Transfer().Conns)
	}
}

// The job slots of the context bound the connections beyond a blob's first.
func TestFillTakesAJobSlotPerExtraConnection(t *testing.T) {
	data, d := blob(1_000_000)
	r := &memRanger{data: data, etag: `"a"`}
	slots := NewSlots(1)
	if _, err := slots.Take(context.Background(), SlotBytes); err != nil { // the caller's own: none is free
		t.Fatal(err)
	}
	w := ingest(t, newStore(t), d, int64(len(data)))
	defer w.Close()
	f := New(w, d, int64(len(data)), "mem", Options{Connections: 4, ParallelMin: 1, Chunk: 64 << 10, Hooks: &Hooks{PiecesFirst: true}, Slots: slots}, nil)
	if err := f.Fill(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if f.Transfer().Conns != 1 || r.maxLive.Load() != 1 {
		t.Fatalf("%d connections with no free slot, want 1", f.Transfer().Conns)
	}
}

// A server that answers a piece with the whole blob is read as one stream, with a note.
func TestFillStartsOverForAServerThatIgnoresRange(t *testing.T) {
	data, d := blob(500_000)
	r := &memRanger{data: data, etag: `"a"`, whole: true}
	opt := Options{Connections: 4, ParallelMin: 1, Chunk: 64 << 10, Hooks: &Hooks{PiecesFirst: true}}
	if _, err := fill(t, newStore(t), r, data, d, opt); err != nil {
		t.Fatal(err)
	}
	if r.opens.Load() != 1 {
		t.Fatalf("%d requests; the whole blob of the first should have been read as one stream", r.opens.Load())
	}
}

// A server that refuses every range (416, or a Content-Range that does not fit) gets one stream
// from byte 0.
func TestFillFallsBackToOneStreamWhenRangesAreRefused(t *testing.T) {
	data, d := blob(500_000)
	r := &memRanger{data: data, etag: `"a"`, refuseAll: true}
	opt := Options{Connections: 4, ParallelMin: 1, Chunk: 64 << 10, Hooks: &Hooks{PiecesFirst: true}}
	if _, err := fill(t, newStore(t), r, data, d, opt); err != nil {
		t.Fatal(err)
	}
}

// A slow single stream is split: the rest comes in pieces.
func TestFillSplitsASlowStream(t *testing.T) {
	data, d := blob(1_000_000)
	r := &memRanger{data: data, etag: `"a"`}
	opt := Options{Connections: 4, ParallelMin: 1, Chunk: 128 << 10, Hooks: &Hooks{SplitWhen: func(n int64, _ time.Duration) bool { return n >= 200_000 }}}
	f, err := fill(t, newStore(t), r, data, d, opt)
	if err != nil {
		t.Fatal(err)
	}
	if r.ranged.Load() < 2 || f.Transfer().Conns < 2 {
		t.Fatalf("%d ranged requests, %d connections; the stream should have been split", r.ranged.Load(), f.Transfer().Conns)
	}
}

// Bytes kept from an earlier fill are continued after, and reported; bytes kept that turn out
// damaged make the fill start over once, with a note, and still succeed.
func TestFillResumesKeptBytesAndDropsDamagedOnes(t *testing.T) {
	data, d := blob(400_000)
	for _, damaged := range []bool{false, true} {
		t.Run(fmt.Sprint("damaged=", damaged), func(t *testing.T) {
			store := newStore(t)
			w := ingest(t, store, d, int64(len(data)))
			kept := append([]byte(nil), data[:150_000]...)
			if damaged {
				kept[10] ^= 1
			}
			w.SetValidator(`"a"`)
			w.Write(kept)
			w.Keep()
			w.Close()
			r := &memRanger{data: data, etag: `"a"`}
			f, err := fill(t, store, r, data, d, Options{})
			if err != nil {
				t.Fatal(err)
			}
			notes := strings.Join(f.Transfer().Notes, "; ")
			if !strings.Contains(notes, "continued a download") {
				t.Fatalf("notes %q", notes)
			}
			if damaged != strings.Contains(notes, "did not hash") {
				t.Fatalf("damaged %v, notes %q", damaged, notes)
			}
			if !damaged && f.Transfer().Bytes != int64(len(data)-150_000) {
				t.Fatalf("transferred %d, want only the rest", f.Transfer().Bytes)
			}
		})
	}
}

// A kept download whose blob changed since (another ETag, If-Range honoured) starts over.
func TestFillStartsOverWhenTheETagChanged(t *testing.T) {
	data, d := blob(400_000)
	store := newStore(t)
	w := ingest(t, store, d, int64(len(data)))
	w.SetValidator(`"old"`)
	w.Write(data[:100_000])
	w.Keep()
	w.Close()
	r := &memRanger{data: data, etag: `"new"`}
	f, err := fill(t, store, r, data, d, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if notes := strings.Join(f.Transfer().Notes, "; "); !strings.Contains(notes, "got the whole blob") {
		t.Fatalf("notes %q", notes)
	}
}

// A server that sends more than the blob's size is stopped at the first byte too many.
func TestFillRefusesAnOverlongAnswer(t *testing.T) {
	data, d := blob(200_000)
	long := append(append([]byte(nil), data...), 'x')
	r := &memRanger{data: long, etag: `"a"`}
	w := ingest(t, newStore(t), d, int64(len(data)))
	defer w.Close()
	err := New(w, d, int64(len(data)), "mem", Options{}, nil).Fill(context.Background(), r)
	if errs.TokenOf(err) != errs.Integrity || !strings.Contains(err.Error(), "sent more") {
		t.Fatalf("err %v", err)
	}
	if w.Size() != int64(len(data)) {
		t.Fatalf("wrote %d bytes, want the declared %d", w.Size(), len(data))
	}
}

// The tee follows a stream from byte 0, including one continued after a break, and a fill in
// pieces through the ingest's hasher, which reads them back in order.
func TestFillTeeFollowsTheBytesInOrder(t *testing.T) {
	data, d := blob(300_000)
	for _, breakAt := range []int64{0, 100_000} {
		t.Run(fmt.Sprint("breakAt=", breakAt), func(t *testing.T) {
			r := &memRanger{data: data, etag: `"a"`, breakAt: breakAt}
			w := ingest(t, newStore(t), d, int64(len(data)))
			defer w.Close()
			tee := &bufTee{}
			f := New(w, d, int64(len(data)), "mem", Options{}, nil)
			f.SetTee(tee)
			if err := f.Fill(context.Background(), r); err != nil {
				t.Fatal(err)
			}
			// A stream continued after a break is still in order: the tee keeps following.
			if f.Tee() == nil || tee.abandoned || !bytes.Equal(tee.buf.Bytes(), data) {
				t.Fatalf("tee kept %v, abandoned %v, %d bytes", f.Tee() != nil, tee.abandoned, tee.buf.Len())
			}
		})
	}
	for _, hashLast := range []bool{false, true} {
		r := &memRanger{data: data, etag: `"a"`}
		w := ingest(t, newStore(t), d, int64(len(data)))
		defer w.Close()
		tee := &bufTee{}
		f := New(w, d, int64(len(data)), "mem", Options{Connections: 2, ParallelMin: 1, Chunk: 64 << 10, Hooks: &Hooks{PiecesFirst: true, HashLast: hashLast}}, nil)
		f.SetTee(tee)
		if err := f.Fill(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		if f.Tee() == nil || tee.abandoned || !bytes.Equal(tee.buf.Bytes(), data) {
			t.Fatalf("pieces, hash last %v: tee kept %v, abandoned %v, %d bytes in order of %d", hashLast, f.Tee() != nil, tee.abandoned, tee.buf.Len(), len(data))
		}
	}
}

// A fill in pieces that falls back to one stream from byte 0 (the server stopped serving ranges)
// drops its tee, which saw bytes the stream sends again, and the hasher writes it nothing more.
func TestFillTeeDroppedWhenPiecesStartOver(t *testing.T) {
	data, d := blob(300_000)
	r := &memRanger{data: data, etag: `"a"`, noRangesAfter: 2}
	w := ingest(t, newStore(t), d, int64(len(data)))
	defer w.Close()
	tee := &bufTee{}
	f := New(w, d, int64(len(data)), "mem", Options{Connections: 2, ParallelMin: 1, Chunk: 64 << 10, Hooks: &Hooks{PiecesFirst: true}}, nil)
	f.SetTee(tee)
	if err := f.Fill(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if f.Tee() != nil || !tee.abandoned || tee.late {
		t.Fatalf("tee kept %v, abandoned %v, written after %v, after the fill started over", f.Tee() != nil, tee.abandoned, tee.late)
	}
	if w.Digest() != d {
		t.Fatal("the ingest does not hold the blob")
	}
}

type bufTee struct {
	mu        sync.Mutex
	buf       bytes.Buffer
	abandoned bool
	late      bool // written to after Abandon
}

func (b *bufTee) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.late = b.late || b.abandoned
	return b.buf.Write(p)
}

func (b *bufTee) Abandon() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.abandoned = true
}

// Progress reports the bytes in, capped at the blob's size, ending at the size.
func TestFillReportsProgress(t *testing.T) {
	data, d := blob(3 << 20)
	r := &memRanger{data: data, etag: `"a"`}
	w := ingest(t, newStore(t), d, int64(len(data)))
	defer w.Close()
	var got []int64
	f := New(w, d, int64(len(data)), "mem", Options{}, func(n int64) { got = append(got, n) })
	if err := f.Fill(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if len(got) < 2 || got[len(got)-1] != int64(len(data)) {
		t.Fatalf("progress %v", got)
	}
}
