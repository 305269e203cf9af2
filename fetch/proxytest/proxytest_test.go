package proxytest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/internal/slowdown"
)

// blob is what the upstream serves under /blob/..., with Range support as http.ServeContent gives.
var blob = func() []byte {
	b := make([]byte, 100<<10)
	for i := range b {
		b[i] = byte(i * 7)
	}
	return b
}()

type upstream struct {
	*httptest.Server
	mu   sync.Mutex
	seen []*http.Request
	body []byte
}

func startUpstream(t *testing.T) *upstream {
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.seen = append(u.seen, r.Clone(context.Background()))
		u.body = body
		u.mu.Unlock()
		switch {
		case strings.HasPrefix(r.URL.Path, "/blob/"):
			w.Header().Set("ETag", `"v1"`)
			http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(blob))
		case r.URL.Path == "/redirect":
			http.Redirect(w, r, "http://elsewhere.invalid/x", http.StatusFound)
		default:
			_, _ = w.Write([]byte("host=" + r.Host))
		}
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) last() (*http.Request, []byte) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.seen[len(u.seen)-1], u.body
}

// fresh is a client that opens a new connection for every request and never follows redirects,
// so what a test sees is what the proxy sent.
func fresh() *http.Client {
	return &http.Client{
		Transport:     &http.Transport{DisableKeepAlives: true, Proxy: nil},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func get(t *testing.T, c *http.Client, url string, hdr ...string) (*http.Response, []byte, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, body, err
}

func TestForwardsFaithfullyAndCounts(t *testing.T) {
	up := startUpstream(t)
	p := Start(t, up.URL, Options{})
	c := fresh()

	resp, body, err := get(t, c, p.URL()+"/blob/a")
	if err != nil || resp.StatusCode != 200 || !bytes.Equal(body, blob) || resp.Header.Get("ETag") != `"v1"` {
		t.Fatalf("whole blob: %v %v %d bytes", err, resp, len(body))
	}
	resp, body, err = get(t, c, p.URL()+"/blob/b", "Range", "bytes=100-199")
	if err != nil || resp.StatusCode != http.StatusPartialContent || !bytes.Equal(body, blob[100:200]) ||
		resp.Header.Get("Content-Range") != "bytes 100-199/102400" {
		t.Fatalf("range: %v %v %d bytes", err, resp, len(body))
	}
	resp, _, err = get(t, c, p.URL()+"/redirect")
	if err != nil || resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "http://elsewhere.invalid/x" {
		t.Fatalf("redirect: %v %v", err, resp)
	}

	// A request body reaches the upstream, the Host header stays the proxy's, and hop-by-hop
	// headers stop at the proxy.
	req, _ := http.NewRequest(http.MethodPut, p.URL()+"/upload?x=1", strings.NewReader("payload"))
	req.Header.Set("Connection", "X-Private")
	req.Header.Set("X-Private", "hop")
	req.Header.Set("X-Kept", "end-to-end")
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	echo, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	seen, sent := up.last()
	if string(sent) != "payload" || seen.Method != http.MethodPut || seen.URL.RawQuery != "x=1" || string(echo) != "host="+p.Addr() ||
		seen.Header.Get("X-Private") != "" || seen.Header.Get("X-Kept") != "end-to-end" {
		t.Fatalf("upstream saw %s %s host %s headers %v body %q; client got %q", seen.Method, seen.URL, seen.Host, seen.Header, sent, echo)
	}

	if got := p.BytesServed("/blob/"); got != int64(len(blob))+100 {
		t.Fatalf("BytesServed(/blob/) = %d", got)
	}
	if got := p.BytesServed("/blob/a"); got != int64(len(blob)) {
		t.Fatalf("BytesServed(/blob/a) = %d", got)
	}
	if got := p.BytesServed(""); got != int64(len(blob))+100+int64(len(echo))+p.Served()["/redirect"] {
		t.Fatalf("BytesServed() = %d, served %v", got, p.Served())
	}
	if p.Requests("/blob/") != 2 || p.Requests("") != 4 || p.Connections() != 4 || p.Faults() != 0 {
		t.Fatalf("requests %d/%d, connections %d, faults %d", p.Requests("/blob/"), p.Requests(""), p.Connections(), p.Faults())
	}
}

func TestCutDropsTheConnectionAfterNBytes(t *testing.T) {
	up := startUpstream(t)
	p := Start(t, up.URL, Options{Fault: Cut, After: 10000, Times: 1})
	c := fresh()

	_, body, err := get(t, c, p.URL()+"/blob/a")
	if !errors.Is(err, io.ErrUnexpectedEOF) || len(body) != 10000 || !bytes.Equal(body, blob[:10000]) {
		t.Fatalf("cut answer: %v after %d bytes", err, len(body))
	}
	// Times: 1 spent, the next answer is whole.
	if _, body, err := get(t, c, p.URL()+"/blob/a"); err != nil || !bytes.Equal(body, blob) {
		t.Fatalf("after the cut: %v, %d bytes", err, len(body))
	}
	if p.Faults() != 1 || p.BytesServed("/blob/a") != 10000+int64(len(blob)) {
		t.Fatalf("faults %d, served %d", p.Faults(), p.BytesServed("/blob/a"))
	}

	// Times 0: every answer; an answer no longer than After is whole and no fault.
	p.Set(Options{Fault: Cut, After: 100})
	for range 2 {
		if _, body, err := get(t, c, p.URL()+"/blob/a"); !errors.Is(err, io.ErrUnexpectedEOF) || len(body) != 100 {
			t.Fatalf("repeated cut: %v after %d bytes", err, len(body))
		}
	}
	if _, body, err := get(t, c, p.URL()+"/blob/a", "Range", "bytes=0-99"); err != nil || !bytes.Equal(body, blob[:100]) {
		t.Fatalf("an answer of exactly After bytes: %v, %d bytes", err, len(body))
	}
	if p.Faults() != 3 {
		t.Fatalf("faults %d, want 3", p.Faults())
	}

	// Cut at 0: the status and headers arrive, the body doesn't.
	p.Set(Options{Fault: Cut})
	resp, body, err := get(t, c, p.URL()+"/blob/a")
	if resp == nil || resp.StatusCode != 200 || !errors.Is(err, io.ErrUnexpectedEOF) || len(body) != 0 {
		t.Fatalf("cut at 0: %v %v %d bytes", resp, err, len(body))
	}

	p.Set(Options{})
	if _, body, err := get(t, c, p.URL()+"/blob/a"); err != nil || !bytes.Equal(body, blob) {
		t.Fatalf("after Set(Options{}): %v, %d bytes", err, len(body))
	}
}

func TestPathContainsNarrowsTheFaults(t *testing.T) {
	up := startUpstream(t)
	p := Start(t, up.URL, Options{PathContains: "/blob/", Fault: Hangup, IgnoreRange: true})
	c := fresh()
	if _, _, err := get(t, c, p.URL()+"/other"); err != nil {
		t.Fatalf("a path outside PathContains: %v", err)
	}
	if _, _, err := get(t, c, p.URL()+"/blob/a"); err == nil {
		t.Fatal("hang-up: got an answer")
	}
	if p.Faults() != 1 || p.Requests("/blob/a") != 1 || p.BytesServed("/blob/") != 0 {
		t.Fatalf("faults %d, requests %d, served %d", p.Faults(), p.Requests("/blob/a"), p.BytesServed("/blob/"))
	}
}

func TestIgnoreRangeServesWholeBodies(t *testing.T) {
	up := startUpstream(t)
	p := Start(t, up.URL, Options{IgnoreRange: true})
	resp, body, err := get(t, fresh(), p.URL()+"/blob/a", "Range", "bytes=100-", "If-Range", `"v1"`)
	if err != nil || resp.StatusCode != 200 || !bytes.Equal(body, blob) {
		t.Fatalf("ranged request through IgnoreRange: %v %v %d bytes", err, resp, len(body))
	}
	if seen, _ := up.last(); seen.Header.Get("Range") != "" || seen.Header.Get("If-Range") != "" {
		t.Fatalf("upstream saw %v", seen.Header)
	}
}

func TestBandwidthCap(t *testing.T) {
	up := startUpstream(t)
	const rate = 128 << 10
	p := Start(t, up.URL, Options{BytesPerSecond: rate})
	start := time.Now()
	_, body, err := get(t, fresh(), p.URL()+"/blob/a", "Range", "bytes=0-32767")
	took := time.Since(start)
	if err != nil || len(body) != 32768 {
		t.Fatalf("%v, %d bytes", err, len(body))
	}
	// A lower bound only: the pacer waits until each byte's due time, so it can never be faster.
	if floor := time.Duration(float64(len(body)) / rate * float64(time.Second)); took < floor {
		t.Fatalf("%d bytes at %d B/s took %s, less than %s", len(body), rate, took, floor)
	}
}

// OnFault runs before the client sees the fault: by the time the body breaks off, the test's
// reaction to it (a link expiring, say) has already happened.
func TestOnFaultComesBeforeTheClientSeesIt(t *testing.T) {
	up := startUpstream(t)
	hit := make(chan struct{}, 2)
	p := Start(t, up.URL, Options{Fault: Cut, After: 10000, Times: 1, OnFault: func() { hit <- struct{}{} }})
	_, _, err := get(t, fresh(), p.URL()+"/blob/a")
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("cut answer: %v", err)
	}
	select {
	case <-hit:
	default:
		t.Fatal("the client saw the cut before OnFault ran")
	}
	if _, _, err := get(t, fresh(), p.URL()+"/blob/a"); err != nil || len(hit) != 0 {
		t.Fatalf("an answer without a fault: %v, OnFault ran %d more times", err, len(hit))
	}
}

func TestStallHoldsTheBodyUntilTheClientGivesUp(t *testing.T) {
	up := startUpstream(t)
	p := Start(t, up.URL, Options{Fault: Stall, After: 1000})
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: slowdown.Scale(300 * time.Millisecond)}
	_, body, err := get(t, c, p.URL()+"/blob/a")
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || !bytes.Equal(body, blob[:1000]) {
		t.Fatalf("stalled body: %v after %d bytes", err, len(body))
	}
	if p.Faults() != 1 {
		t.Fatalf("faults %d", p.Faults())
	}
}

func TestSilenceSendsNothing(t *testing.T) {
	up := startUpstream(t)
	p := Start(t, up.URL, Options{Fault: Silence})
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 300 * time.Millisecond}
	resp, _, err := get(t, c, p.URL()+"/blob/a")
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || resp != nil {
		t.Fatalf("silence: %v %v", resp, err)
	}
	if p.Requests("/blob/a") != 1 || p.Faults() != 1 {
		t.Fatalf("requests %d, faults %d", p.Requests("/blob/a"), p.Faults())
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	if len(up.seen) != 0 {
		t.Fatalf("a silenced request reached the upstream")
	}
}

// Close ends answers that would otherwise wait forever: a silence, a stall and a slow body.
func TestCloseEndsEveryPendingAnswer(t *testing.T) {
	up := startUpstream(t)
	for name, opt := range map[string]Options{"silence": {Fault: Silence}, "stall": {Fault: Stall, After: 10}, "slow body": {BytesPerSecond: 64}} {
		t.Run(name, func(t *testing.T) {
			p := Start(t, up.URL, opt)
			errc := make(chan error, 1)
			go func() {
				_, _, err := get(t, fresh(), p.URL()+"/blob/a")
				errc <- err
			}()
			for p.Requests("/blob/a") == 0 || p.Faults() == 0 && opt.Fault != NoFault || p.BytesServed("") == 0 && opt.Fault == NoFault {
				time.Sleep(5 * time.Millisecond)
			}
			p.Close()
			if err := <-errc; err == nil {
				t.Fatal("the client got a whole answer from a closed proxy")
			}
			p.Close() // twice is fine
		})
	}
}

func TestConcurrentUse(t *testing.T) {
	up := startUpstream(t)
	p := Start(t, up.URL, Options{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			c := &http.Client{}
			for range 4 {
				if _, body, err := get(t, c, p.URL()+"/blob/x"); err != nil || len(body) != len(blob) {
					t.Errorf("%v, %d bytes", err, len(body))
				}
				p.Set(Options{IgnoreRange: true})
				_ = p.Options()
			}
		})
	}
	wg.Wait()
	if p.BytesServed("/blob/x") != 32*int64(len(blob)) || p.Requests("") != 32 {
		t.Fatalf("served %d in %d requests", p.BytesServed("/blob/x"), p.Requests(""))
	}
}

func TestStartAcceptsHostPort(t *testing.T) {
	up := startUpstream(t)
	p := Start(t, strings.TrimPrefix(up.URL, "http://"), Options{})
	if _, body, err := get(t, fresh(), p.URL()+"/x"); err != nil || string(body) != "host="+p.Addr() {
		t.Fatalf("%v %q", err, body)
	}
	if !strings.HasPrefix(p.URL(), "http://127.0.0.1:") || p.URL() != "http://"+p.Addr() {
		t.Fatalf("URL %s, Addr %s", p.URL(), p.Addr())
	}
}
