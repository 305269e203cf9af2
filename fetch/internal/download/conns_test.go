package download

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The rule, from synthetic paces: connections help only where the taker (hash and write) waits
// for the link, each worth headroom times the link's pace, and no more than allowed.
func TestConnectionsFromPaces(t *testing.T) {
	const MiB = 1 << 20
	for _, c := range []struct {
		name        string
		link, taker float64
		most, want  int
	}{
		{"a capped connection, a fast taker", 16 * MiB, 400 * MiB, 4, 4},
		{"a capped connection, more than it may open", 16 * MiB, 400 * MiB, 2, 2},
		{"a link a quarter of the taker's pace: two", 75 * MiB, 300 * MiB, 8, 2},
		{"a link an eighth of the taker's pace: four", 50 * MiB, 400 * MiB, 8, 4},
		{"a link a third of the taker's pace: not worth a second", 100 * MiB, 300 * MiB, 8, 1},
		{"the taker slower than the link: loopback on a loaded machine", 100 * MiB, 80 * MiB, 8, 1},
		{"a fast link however fast the taker: loopback, a LAN", 200 * MiB, 2000 * MiB, 8, 1},
		{"a taker not timed yet", 1 * MiB, 0, 4, 1},
		{"nothing came yet", 0, 300 * MiB, 4, 4},
		{"one connection allowed", 1 * MiB, 300 * MiB, 1, 1},
	} {
		if got := Connections(c.link, c.taker, c.most); got != c.want {
			t.Errorf("%s: Connections(link %.0f MiB/s, taker %.0f MiB/s, at most %d) = %d, want %d", c.name, c.link/MiB, c.taker/MiB, c.most, got, c.want)
		}
	}
}

// loopRanger opens byte ranges of a blob over HTTP, as a store's Ranger does.
type loopRanger struct {
	url  string
	size int64
}

func (h loopRanger) Open(ctx context.Context, off, end int64, validator string) (Part, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.url, nil)
	if err != nil {
		return Part{}, err
	}
	Header(req.Header, off, end, validator)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return Part{}, err
	}
	part, handled, err := Answer(resp, off, end, h.size, "the blob", nil)
	if !handled {
		resp.Body.Close()
		return Part{}, http.ErrNotSupported
	}
	return part, err
}

// A server on this machine sends faster than the ingest hashes and writes: a large blob comes
// over the one stream it starts as, however the rule judges it along the way.
func TestFastLocalServerGetsOneConnection(t *testing.T) {
	data, d := blob(64 << 20)
	// Served from a file, as registries serve blobs: the kernel sends it (sendfile), so that the
	// race detector, which makes every byte this process copies cost several times what SHA-256's
	// assembly pays, does not make the server slow.
	path := filepath.Join(t.TempDir(), "blob")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		f, err := os.Open(path)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		defer f.Close()
		w.Header().Set("ETag", `"blob"`)
		http.ServeContent(w, r, "", time.Time{}, f)
	}))
	defer srv.Close()
	var mu sync.Mutex
	var judged []int
	hooks := &Hooks{Judged: func(conns int) {
		mu.Lock()
		judged = append(judged, conns)
		mu.Unlock()
	}}
	f, err := fill(t, newStore(t), loopRanger{srv.URL, int64(len(data))}, data, d, Options{Connections: 8, ParallelMin: 1 << 20, Hooks: hooks})
	if err != nil {
		t.Fatal(err)
	}
	if f.Transfer().Conns != 1 || requests.Load() != 1 {
		t.Errorf("a fast local server was asked %d times over %d connections (judged %v), want one stream", requests.Load(), f.Transfer().Conns, judged)
	}
	for _, c := range judged {
		if c != 1 {
			t.Fatalf("the stream was judged to want %v connections", judged)
		}
	}
	t.Logf("judged %d times", len(judged))
}

// A stream the rule splits goes on in pieces over the connections it chose, not over all that
// Options allow.
func TestSplitUsesTheConnectionsChosen(t *testing.T) {
	data, d := blob(1_000_000)
	store := newStore(t)
	w := ingest(t, store, d, int64(len(data)))
	defer w.Close()
	// A stream of 1 MiB a second to an ingest timed at its own pace, far faster: as many
	// connections as Options allow.
	f := New(w, d, int64(len(data)), "mem", Options{Connections: 3, ParallelMin: 1, Chunk: 64 << 10}, nil)
	w.Write(data[:100_000]) // gives the ingest's stages a pace
	w.Digest()              // waits for them
	if w.Pace() <= 0 {
		t.Fatalf("the ingest has no pace after taking %d bytes", w.Size())
	}
	// 4 MiB in 8 s, half a MiB a second, judged to want more connections for as long as it
	// takes: an ingest hashing under the race detector on a loaded machine is still far more than
	// the 6 MiB a second that three connections' headroom asks.
	const took = 8 * time.Second
	stream := func(teeBusy time.Duration) *countingWriter {
		ago := time.Now().Add(-took)
		return &countingWriter{w: w, f: f, split: true, start: ago, first: ago, n: judgeFrom, teeBusy: teeBusy,
			wantSince: time.Now().Add(-steadyFor), wantFewest: 8}
	}
	c := stream(0)
	if !c.splitNow() || c.err != errSplit || f.connections() != 3 {
		t.Fatalf("split %v into %d connections, want errSplit and 3", c.err, f.connections())
	}
	// The same stream behind a tee that takes as long as the stream did is not split: the tee
	// is the slower.
	c = stream(took)
	if c.splitNow() || c.err != nil {
		t.Fatalf("a stream held back by its tee was split: %v", c.err)
	}
	f.conns = 2
	w.Restart()
	r := &memRanger{data: data, etag: `"a"`}
	f.opt.Hooks = &Hooks{PiecesFirst: true}
	if err := f.Fill(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if f.Transfer().Conns != 2 || r.maxLive.Load() > 2 {
		t.Fatalf("%d connections, %d answers open at once; the judgment chose 2 of the 3 allowed", f.Transfer().Conns, r.maxLive.Load())
	}
	if w.Digest() != d {
		t.Fatalf("the ingest hashes to %s, want %s", w.Digest(), d)
	}
}

// A stream is split only once the judgments have called for more connections for steadyFor, and
// then over the fewest they called for; one judgment against resets the wait.
func TestSplitWaitsForSteadyJudgments(t *testing.T) {
	var c countingWriter
	if got := c.steady(4); got != 1 {
		t.Fatalf("the first judgment for 4 split the stream into %d", got)
	}
	c.wantSince = time.Now().Add(-steadyFor)
	if got := c.steady(6); got != 4 {
		t.Fatalf("after steadyFor of judgments for 4 and 6: %d connections, want the fewest (4)", got)
	}
	if got := c.steady(1); got != 1 || !c.wantSince.IsZero() {
		t.Fatalf("a judgment for one connection gave %d and left the wait at %v", got, c.wantSince)
	}
	if got := c.steady(5); got != 1 {
		t.Fatalf("a judgment for 5 right after one for 1 split the stream into %d", got)
	}
}
