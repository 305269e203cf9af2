package proxytest

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/internal/slowdown"
	"github.com/murmur-nexus/mur/internal/slowdown/deadline"
)

// manualClock moves only when a test moves it, so that the latency's tests follow events, never
// the machine's speed.
type manualClock struct {
	mu       sync.Mutex
	t        time.Time
	sleepers []*sleeper
	changed  chan struct{} // closed and replaced whenever a sleeper comes
}

type sleeper struct {
	due  time.Time
	wake chan struct{}
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newManualClock() *manualClock { return &manualClock{t: t0, changed: make(chan struct{})} }

func (c *manualClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *manualClock) sleepUntil(ctx context.Context, due time.Time) bool {
	c.mu.Lock()
	if !due.After(c.t) {
		c.mu.Unlock()
		return ctx.Err() == nil
	}
	s := &sleeper{due: due, wake: make(chan struct{})}
	c.sleepers = append(c.sleepers, s)
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
	select {
	case <-s.wake:
		return true
	case <-ctx.Done():
		return false
	}
}

// awaitSleeper returns once something sleeps until due. The watchdog only turns a hang into a
// failure; nothing is timed.
func (c *manualClock) awaitSleeper(t *testing.T, due time.Time) {
	t.Helper()
	watchdog := time.After(slowdown.Scale(30 * time.Second))
	for {
		c.mu.Lock()
		for _, s := range c.sleepers {
			if s.due.Equal(due) {
				c.mu.Unlock()
				return
			}
		}
		changed := c.changed
		c.mu.Unlock()
		select {
		case <-changed:
		case <-watchdog:
			t.Fatalf("nothing sleeps until t0+%v", due.Sub(t0))
		}
	}
}

// advanceTo moves the clock to at and wakes every sleeper due by then.
func (c *manualClock) advanceTo(at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = at
	keep := c.sleepers[:0]
	for _, s := range c.sleepers {
		if s.due.After(at) {
			keep = append(keep, s)
		} else {
			close(s.wake)
		}
	}
	c.sleepers = keep
}

func none[T any](t *testing.T, ch <-chan T, what string) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("%s came early: %v", what, v)
	default:
	}
}

const rtt = 100 * time.Millisecond

func ms(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

// latencyWorld is a proxy with a 100 ms RTT on a manual clock, in front of an upstream whose
// handler a test supplies, and a client that keeps its connections.
type latencyWorld struct {
	clock   *manualClock
	proxy   *Proxy
	stamped chan delayedChunk
	client  *http.Client
}

func newLatencyWorld(t *testing.T, h http.HandlerFunc) *latencyWorld {
	up := httptest.NewServer(h)
	t.Cleanup(up.Close)
	w := &latencyWorld{clock: newManualClock(), stamped: make(chan delayedChunk, 100)}
	w.proxy = start(t, up.URL, Options{RTT: rtt}, w.clock, func(c delayedChunk) { w.stamped <- c })
	tr := &http.Transport{Proxy: nil}
	t.Cleanup(tr.CloseIdleConnections)
	w.client = &http.Client{Transport: tr}
	return w
}

type answer struct {
	body string
	err  error
}

func (w *latencyWorld) get(path string) <-chan answer {
	out := make(chan answer, 1)
	go func() {
		resp, err := w.client.Get(w.proxy.URL() + path)
		if err != nil {
			out <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		out <- answer{string(b), err}
	}()
	return out
}

// stamps collects the delays of an answer's body: n body bytes, then its end.
func (w *latencyWorld) stamps(t *testing.T, n int) []time.Time {
	t.Helper()
	var dues []time.Time
	for got := 0; ; {
		c := deadline.Recv(t, w.stamped, "body chunk")
		dues = append(dues, c.due)
		got += len(c.b)
		if c.err != nil {
			if got != n {
				t.Fatalf("the body ended after %d bytes, want %d", got, n)
			}
			return dues
		}
	}
}

// A request on a new connection reaches the upstream 1.5 RTT after it was sent (the handshake,
// then half a round trip) and its answer arrives half a round trip after the upstream gave it: 2
// RTT in all. The next request on the same connection costs 1 RTT.
func TestRTTNewConnectionAndReuse(t *testing.T) {
	arrived := make(chan string, 2)
	w := newLatencyWorld(t, func(rw http.ResponseWriter, r *http.Request) {
		arrived <- r.URL.Path
		rw.Write([]byte("ok" + r.URL.Path))
	})

	got := w.get("/a")
	w.clock.awaitSleeper(t, ms(150))
	none(t, arrived, "the request")
	w.clock.advanceTo(ms(150))
	if p := deadline.Recv(t, arrived, "request at the upstream"); p != "/a" {
		t.Fatalf("upstream got %s", p)
	}
	for _, due := range w.stamps(t, len("ok/a")) {
		if !due.Equal(ms(200)) {
			t.Fatalf("a body chunk given at t0+150ms is due at t0+%v, want t0+200ms", due.Sub(t0))
		}
	}
	w.clock.awaitSleeper(t, ms(200)) // the status and headers
	none(t, got, "the answer")
	w.clock.advanceTo(ms(200))
	if a := deadline.Recv(t, got, "answer"); a.err != nil || a.body != "ok/a" {
		t.Fatalf("answer %+v", a)
	}

	got = w.get("/b")
	w.clock.awaitSleeper(t, ms(250))
	none(t, arrived, "the second request")
	w.clock.advanceTo(ms(250))
	deadline.Recv(t, arrived, "second request at the upstream")
	w.stamps(t, len("ok/b"))
	w.clock.awaitSleeper(t, ms(300))
	none(t, got, "the second answer")
	w.clock.advanceTo(ms(300))
	if a := deadline.Recv(t, got, "second answer"); a.err != nil || a.body != "ok/b" {
		t.Fatalf("second answer %+v", a)
	}
	if n := w.proxy.Connections(); n != 1 {
		t.Fatalf("%d connections; the second request should have reused the first", n)
	}
}

// Each chunk of a body arrives half a round trip after the upstream gave it, in order, and chunks
// given together arrive together: the delays overlap, so there is no bandwidth cap.
func TestRTTDelaysEachChunkWithoutACap(t *testing.T) {
	gate := make(chan struct{})
	w := newLatencyWorld(t, func(rw http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(rw)
		rw.Write([]byte("first."))
		rc.Flush()
		<-gate
		for _, s := range []string{"second.", "third.", "fourth."} {
			rw.Write([]byte(s))
			rc.Flush()
		}
	})
	type read struct {
		data string
		at   time.Time
	}
	reads := make(chan read, 10)
	go func() {
		resp, err := w.client.Get(w.proxy.URL() + "/chunks")
		if err != nil {
			close(reads)
			return
		}
		defer resp.Body.Close()
		buf := make([]byte, 100)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				reads <- read{string(buf[:n]), w.clock.now()}
			}
			if err != nil {
				close(reads)
				return
			}
		}
	}()

	w.clock.awaitSleeper(t, ms(150))
	w.clock.advanceTo(ms(150))
	if c := deadline.Recv(t, w.stamped, "first chunk"); string(c.b) != "first." || !c.due.Equal(ms(200)) {
		t.Fatalf("first chunk %q due t0+%v", c.b, c.due.Sub(t0))
	}
	w.clock.awaitSleeper(t, ms(200))
	w.clock.advanceTo(ms(200))
	if r := deadline.Recv(t, reads, "first chunk at the client"); r.data != "first." || r.at.Before(ms(200)) {
		t.Fatalf("client read %q at t0+%v", r.data, r.at.Sub(t0))
	}

	// The upstream gives three more chunks at t0+210ms: all are due at t0+260ms, not one after
	// another.
	w.clock.advanceTo(ms(210))
	close(gate)
	var rest string
	for _, due := range w.stamps(t, len("second.third.fourth.")) {
		if !due.Equal(ms(260)) {
			t.Fatalf("a chunk given at t0+210ms is due at t0+%v, want t0+260ms", due.Sub(t0))
		}
	}
	w.clock.awaitSleeper(t, ms(260))
	none(t, reads, "the later chunks")
	w.clock.advanceTo(ms(260))
	for r := range reads {
		rest += r.data
	}
	if rest != "second.third.fourth." {
		t.Fatalf("the client read %q after the first chunk", rest)
	}
}

// The real clock: lower bounds only, which a loaded machine can only make longer.
func TestRTTOnTheRealClock(t *testing.T) {
	up := startUpstream(t)
	const rtt = 40 * time.Millisecond
	p := Start(t, up.URL, Options{RTT: rtt, PathContains: "/never"})
	c := &http.Client{Transport: &http.Transport{Proxy: nil}}
	start := time.Now()
	if _, body, err := get(t, c, p.URL()+"/blob/a"); err != nil || len(body) != len(blob) {
		t.Fatalf("through the latency: %v, %d bytes", err, len(body))
	}
	if d := time.Since(start); d < 2*rtt {
		t.Errorf("a request on a new connection took %v, under 2 RTT", d)
	}
	start = time.Now()
	if _, _, err := get(t, c, p.URL()+"/x"); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < rtt {
		t.Errorf("a request on a kept connection took %v, under 1 RTT", d)
	}
	// Faults still happen on a slow network.
	p.Set(Options{RTT: rtt, Fault: Cut, After: 1000})
	if _, body, err := get(t, fresh(), p.URL()+"/blob/b"); err == nil || len(body) != 1000 {
		t.Fatalf("a cut answer over the latency: %v, %d bytes", err, len(body))
	}
}

// The request log lists each request with its answer's status and the connection it came on.
func TestRequestLog(t *testing.T) {
	up := startUpstream(t)
	p := Start(t, up.URL, Options{})
	kept := &http.Client{Transport: &http.Transport{Proxy: nil}}
	get(t, kept, p.URL()+"/blob/a")
	get(t, kept, p.URL()+"/x")
	get(t, fresh(), p.URL()+"/redirect")
	// A request is logged when its handler returns, which may come after the client has read
	// the answer: wait for the third entry rather than race it.
	log := p.Log()
	for watchdog := time.After(slowdown.Scale(30 * time.Second)); len(log) < 3; log = p.Log() {
		select {
		case <-watchdog:
			t.Fatalf("log %+v", log)
		case <-time.After(time.Millisecond):
		}
	}
	if len(log) != 3 {
		t.Fatalf("log %+v", log)
	}
	for i, want := range []struct {
		path   string
		status int
		conn   int
	}{{"/blob/a", 200, 1}, {"/x", 200, 1}, {"/redirect", 302, 2}} {
		if l := log[i]; l.Path != want.path || l.Status != want.status || l.Conn != want.conn || l.End.Before(l.Start) {
			t.Errorf("log[%d] = %+v, want %s %d on connection %d", i, l, want.path, want.status, want.conn)
		}
	}
	p.ResetLog()
	if len(p.Log()) != 0 || p.Connections() != 0 {
		t.Fatal("ResetLog left entries or connections")
	}
}
