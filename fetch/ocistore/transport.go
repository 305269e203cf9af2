package ocistore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

// newBaseTransport bounds every phase that net/http leaves unbounded by default: go-containerregistry's
// DefaultTransport has no ResponseHeaderTimeout, so a registry that accepts and then stalls would
// hang a pull forever.
func newBaseTransport(timeout time.Duration) *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   50,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
		ExpectContinueTimeout: time.Second,
		// Blobs are already compressed zips; asking for gzip would only cost CPU.
		DisableCompression: true,
		// Larger socket reads mean fewer syscalls on a 256 MiB blob.
		ReadBufferSize:  256 << 10,
		WriteBufferSize: 256 << 10,
	}
}

// errStalled marks a response body that delivered no byte for the idle timeout.
var errStalled = errors.New("stalled")

// idleTimeoutTransport ends a request whose response does not arrive, or whose body pauses, for
// longer than timeout. A whole-request deadline would cut off a large blob on a slow link; an
// idle deadline only cuts off a transfer that has stopped.
type idleTimeoutTransport struct {
	inner   http.RoundTripper
	timeout time.Duration
}

func (t *idleTimeoutTransport) RoundTrip(req *http.Request) (*http.Response, error) {
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
			return nil, fmt.Errorf("no response within %s: %w", t.timeout, errStalled)
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
		return 0, fmt.Errorf("no data for %s: %w", b.timeout, errStalled)
	}
	// Only time spent waiting on the network counts; a slow consumer between reads does not.
	b.timer.Reset(b.timeout)
	n, err := b.body.Read(p)
	b.timer.Stop()
	if err != nil && err != io.EOF && b.stalled.Load() {
		return n, fmt.Errorf("no data for %s: %w", b.timeout, errStalled)
	}
	return n, err
}

type progressBody struct {
	io.ReadCloser
	b *idleBody
}

func (p *progressBody) Read(buf []byte) (int, error) {
	p.b.timer.Reset(p.b.timeout)
	return p.ReadCloser.Read(buf)
}

func (b *idleBody) Close() error {
	b.timer.Stop()
	err := b.body.Close()
	b.cancel()
	return err
}

// retryTransport retries transient failures with capped exponential backoff, honouring a
// Retry-After that a registry sends with 429 or 503. go-containerregistry's own retry ignores
// Retry-After, so its retries are switched off and this one does the work.
type retryTransport struct {
	inner   http.RoundTripper
	retries int
	backoff time.Duration // the first wait; each further wait doubles
	maxWait time.Duration // the longest single wait, Retry-After included
}

var retryStatus = map[int]bool{
	http.StatusRequestTimeout:      true,
	http.StatusTooManyRequests:     true,
	http.StatusInternalServerError: true,
	http.StatusBadGateway:          true,
	http.StatusServiceUnavailable:  true,
	http.StatusGatewayTimeout:      true,
}

func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	// A streamed body can't be sent twice; such requests (blob uploads) get one attempt.
	replayable := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	wait := t.backoff
	for attempt := 0; ; attempt++ {
		if attempt > 0 && req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			req = req.Clone(req.Context())
			req.Body = body
		}
		resp, err := t.inner.RoundTrip(req)
		last := attempt >= t.retries || !replayable
		if err != nil {
			if last || req.Context().Err() != nil || !transient(err) {
				return nil, err
			}
		} else if !retryStatus[resp.StatusCode] || last {
			return resp, nil
		}
		delay := jitter(wait)
		if resp != nil {
			if ra, ok := retryAfter(resp.Header.Get("Retry-After")); ok {
				delay = ra
			}
			io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
		}
		if delay > t.maxWait {
			delay = t.maxWait
		}
		select {
		case <-req.Context().Done():
			return nil, req.Context().Err()
		case <-time.After(delay):
		}
		wait *= 2
	}
}

// transient reports whether a failed round trip may work a moment later. A refused connection
// or a TLS failure will not, and retrying it would only delay the error; go-containerregistry's
// ping also probes https before http on loopback, and that probe must fail fast.
func transient(err error) bool {
	var ne net.Error
	switch {
	case errors.Is(err, errStalled),
		errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, io.EOF),
		errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE),
		errors.As(err, &ne) && ne.Timeout():
		return true
	}
	return false
}

func jitter(d time.Duration) time.Duration {
	return d + time.Duration(rand.Int64N(int64(d)/5+1))
}

// retryAfter parses a Retry-After header: delay-seconds or an HTTP date.
func retryAfter(h string) (time.Duration, bool) {
	if h == "" {
		return 0, false
	}
	if s, err := strconv.Atoi(h); err == nil && s >= 0 {
		return time.Duration(s) * time.Second, true
	}
	if at, err := http.ParseTime(h); err == nil {
		d := time.Until(at)
		if d < 0 {
			d = 0
		}
		return d, true
	}
	return 0, false
}

// httpsOnlyTransport refuses plain HTTP to anything but the loopback interface.
// go-containerregistry would also use plain HTTP for private (RFC 1918) addresses and *.local
// names, where credentials would cross a network in the clear.
type httpsOnlyTransport struct {
	inner http.RoundTripper
	host  string // the registry's HOST[:PORT]; redirects to storage elsewhere are left alone
}

func (t *httpsOnlyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme == "http" && req.URL.Host == t.host && !isLoopback(req.URL.Hostname()) {
		req = req.Clone(req.Context())
		req.URL.Scheme = "https"
	}
	return t.inner.RoundTrip(req)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
