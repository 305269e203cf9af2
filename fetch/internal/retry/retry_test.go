package retry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/internal/slowdown"
)

func TestRetryAfter(t *testing.T) {
	if d, ok := RetryAfter("3"); !ok || d != 3*time.Second {
		t.Errorf("seconds: %v %v", d, ok)
	}
	at := time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)
	if d, ok := RetryAfter(at); !ok || d < 59*time.Minute || d > time.Hour {
		t.Errorf("date: %v %v", d, ok)
	}
	for _, h := range []string{"", "-1", "soon"} {
		if _, ok := RetryAfter(h); ok {
			t.Errorf("RetryAfter(%q) parsed", h)
		}
	}
}

func TestDo(t *testing.T) {
	ctx := context.Background()
	p := Policy{Retries: 2, Backoff: time.Millisecond}
	calls := 0
	boom := errors.New("boom")
	err := p.Do(ctx, func(int) error { calls++; return boom })
	var ex *Exhausted
	if !errors.As(err, &ex) || ex.Attempts != 3 || !errors.Is(err, boom) || calls != 3 {
		t.Fatalf("transient: %v after %d calls", err, calls)
	}
	calls = 0
	err = p.Do(ctx, func(int) error { calls++; return Permanent(boom) })
	if err != boom || calls != 1 {
		t.Fatalf("permanent: %v after %d calls", err, calls)
	}
	calls = 0
	err = p.Do(ctx, func(a int) error {
		calls++
		if a < 2 {
			return boom
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("success on the last attempt: %v after %d calls", err, calls)
	}
	// A server's wait is honoured, up to MaxWait.
	start := time.Now()
	err = Policy{Retries: 1, Backoff: time.Millisecond, MaxWait: 300 * time.Millisecond}.Do(ctx, func(a int) error {
		if a == 0 {
			return After(boom, time.Hour)
		}
		return nil
	})
	if d := time.Since(start); err != nil || d < 250*time.Millisecond || d > slowdown.Scale(5*time.Second) {
		t.Fatalf("After: %v after %s", err, d)
	}
	// A context that ends during a wait abandons the loop.
	cctx, cancel := context.WithCancel(ctx)
	err = Policy{Retries: 5, Backoff: time.Hour}.Do(cctx, func(int) error { cancel(); return boom })
	var ab *Abandoned
	if !errors.As(err, &ab) || !errors.Is(err, context.Canceled) || !errors.Is(err, boom) {
		t.Fatalf("abandoned: %v", err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func answer(code int, retryAfter string) *http.Response {
	h := http.Header{}
	if retryAfter != "" {
		h.Set("Retry-After", retryAfter)
	}
	return &http.Response{StatusCode: code, Header: h, Body: io.NopCloser(strings.NewReader("body"))}
}

func TestTransport(t *testing.T) {
	var calls int
	codes := []int{503, 429, 200}
	rt := &Transport{Policy: Policy{Retries: 3, Backoff: time.Millisecond}, Inner: roundTripFunc(func(*http.Request) (*http.Response, error) {
		c := codes[min(calls, len(codes)-1)]
		calls++
		return answer(c, "0"), nil
	})}
	req, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
	resp, err := rt.RoundTrip(req)
	if err != nil || resp.StatusCode != 200 || calls != 3 {
		t.Fatalf("got %v, %v after %d calls", resp, err, calls)
	}
	// The last attempt's answer is the caller's to report.
	calls, codes = 0, []int{502}
	resp, err = rt.RoundTrip(req)
	if err != nil || resp.StatusCode != 502 || calls != 4 {
		t.Fatalf("exhausted: %v, %v after %d calls", resp, err, calls)
	}
	// A request whose context says Once gets the first answer, whatever it is.
	calls = 0
	once := req.WithContext(Once(req.Context()))
	if resp, err = rt.RoundTrip(once); err != nil || resp.StatusCode != 502 || calls != 1 {
		t.Fatalf("once: %v, %v after %d calls", resp, err, calls)
	}
	// A streamed upload can't be sent twice.
	calls = 0
	up, _ := http.NewRequest(http.MethodPut, "http://x/", io.NopCloser(strings.NewReader("data")))
	up.GetBody = nil
	if resp, err = rt.RoundTrip(up); err != nil || resp.StatusCode != 502 || calls != 1 {
		t.Fatalf("upload: %v, %v after %d calls", resp, err, calls)
	}
	// A refused connection is not transient.
	calls = 0
	rt.Inner = roundTripFunc(func(*http.Request) (*http.Response, error) { calls++; return nil, syscall.ECONNREFUSED })
	if _, err = rt.RoundTrip(req); !errors.Is(err, syscall.ECONNREFUSED) || calls != 1 {
		t.Fatalf("refused: %v after %d calls", err, calls)
	}
	calls = 0
	rt.Inner = roundTripFunc(func(*http.Request) (*http.Response, error) { calls++; return nil, syscall.ECONNRESET })
	if _, err = rt.RoundTrip(req); !errors.Is(err, syscall.ECONNRESET) || calls != 4 {
		t.Fatalf("reset: %v after %d calls", err, calls)
	}
	// A server that sent no answer for the whole idle timeout is not asked again.
	calls = 0
	rt.Inner = roundTripFunc(func(*http.Request) (*http.Response, error) {
		calls++
		return nil, fmt.Errorf("no data for 1s, not even an answer: %w", ErrStalled)
	})
	if _, err = rt.RoundTrip(req); !errors.Is(err, ErrStalled) || calls != 1 {
		t.Fatalf("stalled: %v after %d calls", err, calls)
	}
	calls = 0
	rt.Inner = roundTripFunc(func(*http.Request) (*http.Response, error) { calls++; return nil, os.ErrDeadlineExceeded })
	if _, err = rt.RoundTrip(req); !errors.Is(err, os.ErrDeadlineExceeded) || calls != 1 {
		t.Fatalf("timeout awaiting the answer: %v after %d calls", err, calls)
	}
}

func TestIdleTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow-answer" {
			<-release
			return
		}
		w.Write([]byte("first bytes"))
		w.(http.Flusher).Flush()
		<-release
	}))
	defer srv.Close()
	defer close(release) // before Close, which waits for the handlers
	hc := &http.Client{Transport: IdleTimeout(http.DefaultTransport, 150*time.Millisecond)}
	start := time.Now()
	_, err := hc.Get(srv.URL + "/slow-answer")
	if !errors.Is(err, ErrStalled) || !strings.Contains(err.Error(), "no data for 150ms") || time.Since(start) > slowdown.Scale(10*time.Second) {
		t.Fatalf("a stalled answer: %v", err)
	}
	resp, err := hc.Get(srv.URL + "/slow-body")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if string(b) != "first bytes" || !errors.Is(err, ErrStalled) || !Transient(err) {
		t.Fatalf("a stalled body: %q, %v", b, err)
	}
}
