package cas

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/internal/atomicfile"
)

// syncRecorder counts the fsyncs of ingests and can hold or fail the first one.
type syncRecorder struct {
	mu      sync.Mutex
	syncs   int
	renamed bool // a rename happened
	order   []string
	hold    chan struct{} // the first sync waits on it, when set, after closing entered
	entered chan struct{}
	failOne bool // the first sync fails
}

func (r *syncRecorder) durability() atomicfile.Durability {
	return atomicfile.Durability{
		Sync: func(f *os.File) error {
			r.mu.Lock()
			r.syncs++
			first := r.syncs == 1
			r.order = append(r.order, "sync")
			r.mu.Unlock()
			if first && r.hold != nil {
				close(r.entered)
				<-r.hold
			}
			if first && r.failOne {
				return errors.New("injected EIO")
			}
			return f.Sync()
		},
		Rename: func(oldpath, newpath string) error {
			r.mu.Lock()
			r.order = append(r.order, "rename")
			r.mu.Unlock()
			return os.Rename(oldpath, newpath)
		},
	}
}

// SyncSoon's fsync runs in the background, the commit waits for it before the rename, and no
// second fsync is made for bytes it already made durable.
func TestSyncSoonIsWaitedForAndNotRepeated(t *testing.T) {
	t.Parallel()
	r := &syncRecorder{hold: make(chan struct{}), entered: make(chan struct{})}
	s, w := recorded(t, r)
	w.Write([]byte("early"))
	w.SyncSoon()
	committed := make(chan []error, 1)
	go func() { committed <- s.CommitAll(ctx, []Commit{{w, 5, digest.FromString("early")}}) }()
	// The commit can't rename while the early fsync is held.
	<-r.entered
	if s.Has(digest.FromString("early")) {
		t.Fatal("the blob is visible while its fsync is still running")
	}
	close(r.hold)
	if errs := <-committed; errs[0] != nil {
		t.Fatal(errs[0])
	}
	if got := strings.Join(r.order, " "); got != "sync rename" {
		t.Fatalf("steps %q, want one sync, then the rename", got)
	}
}

// A failed early fsync fails the commit, batched or alone, and is never retried: after a failed
// fsync the kernel may have dropped the dirty pages, so a second one could report bytes durable
// that are not.
func TestSyncSoonFailureFailsTheCommit(t *testing.T) {
	t.Parallel()
	for _, batched := range []bool{true, false} {
		r := &syncRecorder{failOne: true}
		s, w := recorded(t, r)
		w.Write([]byte("doomed"))
		w.SyncSoon()
		var err error
		if batched {
			err = s.CommitAll(ctx, []Commit{{w, 6, digest.FromString("doomed")}})[0]
		} else {
			_, err = w.Commit(ctx, 6, digest.FromString("doomed"))
		}
		if err == nil || !strings.Contains(err.Error(), "injected EIO") {
			t.Fatalf("batched %v: commit = %v, want the early fsync's failure", batched, err)
		}
		if s.Has(digest.FromString("doomed")) || r.syncs != 1 {
			t.Fatalf("batched %v: visible %v after %d fsyncs; want nothing visible and no second fsync", batched, s.Has(digest.FromString("doomed")), r.syncs)
		}
	}
}

// Bytes written after SyncSoon are synced again before the rename.
func TestSyncSoonThenMoreBytes(t *testing.T) {
	t.Parallel()
	r := &syncRecorder{}
	s, w := recorded(t, r)
	w.Write([]byte("first"))
	w.SyncSoon()
	w.Write([]byte(" and more"))
	if errs := s.CommitAll(ctx, []Commit{{w, 14, digest.FromString("first and more")}}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if got := strings.Join(r.order, " "); got != "sync sync rename" {
		t.Fatalf("steps %q, want the early sync, a second for the new bytes, then the rename", got)
	}
}

// A large ingest is flushed as it is written, and a flush that fails fails the ingest even when
// the fsync at the commit succeeds: the failed one took the error off the file.
func TestBackgroundFlushFailureFailsTheIngest(t *testing.T) {
	t.Parallel()
	r := &syncRecorder{failOne: true}
	s, w := recorded(t, r)
	data := bytes.Repeat([]byte("x"), flushEvery+chunkSize)
	w.Write(data)
	_, err := w.Commit(ctx, int64(len(data)), digest.FromBytes(data))
	if err == nil || !strings.Contains(err.Error(), "injected EIO") {
		t.Fatalf("Commit = %v, want the background flush's failure", err)
	}
	if s.Has(digest.FromBytes(data)) {
		t.Fatal("the blob is visible")
	}

	// Without the failure the same bytes commit, with a flush on the way.
	r2 := &syncRecorder{}
	s, w = recorded(t, r2)
	w.Write(data)
	if _, err := w.Commit(ctx, int64(len(data)), digest.FromBytes(data)); err != nil {
		t.Fatal(err)
	}
	if r2.syncs < 2 {
		t.Errorf("%d fsyncs for %d bytes, want a background flush before the commit's", r2.syncs, len(data))
	}
}

// A follower of pieces gets every byte once, in order, however the pieces arrive, and nothing
// after Unfollow returns.
func TestPartsFollowerGetsTheBytesInOrder(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	w, err := s.NewWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	p, err := w.Parts(int64(len(data)), false)
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	p.Follow(&got)
	const piece = 100_000
	var offs []int
	for off := 0; off < len(data); off += piece {
		offs = append(offs, off)
	}
	for i := len(offs) - 1; i >= 0; i-- { // last piece first
		end := min(offs[i]+piece, len(data))
		if _, err := p.WriteAt(data[offs[i]:end], int64(offs[i])); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("the follower got %d bytes, not the %d in order", got.Len(), len(data))
	}

	w2, _ := s.NewWriter(ctx)
	defer w2.Close()
	p2, err := w2.Parts(int64(len(data)), false)
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	p2.Follow(writerFunc(func(b []byte) { n.Add(int64(len(b))) }))
	p2.Unfollow()
	p2.WriteAt(data, 0)
	if err := p2.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if n.Load() != 0 {
		t.Fatalf("the follower got %d bytes after Unfollow", n.Load())
	}
}

// recorded opens a store whose fsyncs r records, and an ingest in it.
func recorded(t *testing.T, r *syncRecorder) (*Store, *Writer) {
	t.Helper()
	s := openStore(t)
	s.durability = r.durability()
	w, err := s.NewWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return s, w
}

type writerFunc func([]byte)

func (f writerFunc) Write(b []byte) (int, error) { f(b); return len(b), nil }
