package retry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

// ErrStalled marks a request that got no answer, or whose body delivered no byte, for the idle
// timeout.
var ErrStalled = errors.New("stalled")

// IdleTimeout ends a request whose answer does not arrive, or whose body (either way) pauses, for
// longer than timeout. A whole-request deadline would cut off a large blob on a slow link; an idle
// deadline only cuts off a transfer that has stopped.
func IdleTimeout(inner http.RoundTripper, timeout time.Duration) http.RoundTripper {
	return &idleTransport{inner: inner, timeout: timeout}
}

type idleTransport struct {
	inner   http.RoundTripper
	timeout time.Duration
}

func (t *idleTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	b := &idleBody{timeout: t.timeout, cancel: cancel}
	b.timer = time.AfterFunc(t.timeout, func() { b.stalled.Store(true); cancel() })
	req = req.WithContext(ctx)
	if req.Body != nil && req.Body != http.NoBody {
		// Sending a large upload is progress too: each chunk taken from the body restarts the clock.
		req.Body = &progressBody{ReadCloser: req.Body, b: b}
	}
	resp, err := t.inner.RoundTrip(req)
	if err != nil {
		b.timer.Stop()
		cancel()
		if b.stalled.Load() {
			return nil, fmt.Errorf("no data for %s, not even an answer: %w", t.timeout, ErrStalled)
		}
		return nil, err
	}
	// From here on only reads are timed, so a consumer that is slow to start reading is not cut off.
	b.timer.Stop()
	b.body = resp.Body
	resp.Body = b
	return resp, nil
}

type idleBody struct {
	body    io.ReadCloser
	timeout time.Duration
	timer   *time.Timer
	cancel  context.CancelFunc
	stalled atomic.Bool
}

func (b *idleBody) Read(p []byte) (int, error) {
	if b.stalled.Load() {
		return 0, fmt.Errorf("no data for %s: %w", b.timeout, ErrStalled)
	}
	// Only time spent waiting on the network counts; a slow consumer between reads does not.
	b.timer.Reset(b.timeout)
	n, err := b.body.Read(p)
	b.timer.Stop()
	if err != nil && err != io.EOF && b.stalled.Load() {
		return n, fmt.Errorf("no data for %s: %w", b.timeout, ErrStalled)
	}
	return n, err
}

func (b *idleBody) Close() error {
	b.timer.Stop()
	err := b.body.Close()
	b.cancel()
	return err
}

type progressBody struct {
	io.ReadCloser
	b *idleBody
}

func (p *progressBody) Read(buf []byte) (int, error) {
	p.b.timer.Reset(p.b.timeout)
	return p.ReadCloser.Read(buf)
}
