// Package retry is the one retry loop of mur's network clients: capped exponential backoff with
// jitter, a server's Retry-After honoured, and an idle timeout that ends a request whose answer
// or body stops arriving. Registries and GitHub both go through it.
package retry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"time"
)

// Policy says how often and how patiently to try again.
type Policy struct {
	Retries int           // attempts after the first
	Backoff time.Duration // the first wait; each further wait doubles
	MaxWait time.Duration // the longest single wait, a server's Retry-After included; 0 means none
}

// Exhausted is Do's error when every attempt failed transiently.
type Exhausted struct {
	Attempts int
	Last     error
}

func (e *Exhausted) Error() string {
	return fmt.Sprintf("failed %d times (last: %v)", e.Attempts, e.Last)
}
func (e *Exhausted) Unwrap() error { return e.Last }

// Abandoned is Do's error when the context ended while it waited to try again.
type Abandoned struct {
	Cause error // the context's error
	Last  error // the failure it was waiting to retry
}

func (e *Abandoned) Error() string {
	return fmt.Sprintf("abandoned (%v) while retrying after: %v", e.Cause, e.Last)
}
func (e *Abandoned) Unwrap() []error { return []error{e.Cause, e.Last} }

type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// Permanent marks err as one that trying again will not mend; Do returns it (unwrapped) at once.
func Permanent(err error) error { return permanent{err} }

type after struct {
	err error
	d   time.Duration
}

func (a after) Error() string { return a.err.Error() }
func (a after) Unwrap() error { return a.err }

// After marks err as transient, with the server asking for a wait of d before the next attempt.
func After(err error, d time.Duration) error { return after{err, d} }

// Do calls op (with the attempt's number, from 0) until it returns nil, a Permanent error, or has
// failed Retries+1 times (an *Exhausted error). Between attempts it waits Backoff, doubled each
// time and with up to a quarter more of jitter, or what op asked for with After, never more than
// MaxWait; a context that ends during a wait is an *Abandoned error.
func (p Policy) Do(ctx context.Context, op func(attempt int) error) error {
	wait := p.Backoff
	for attempt := 0; ; attempt++ {
		err := op(attempt)
		if err == nil {
			return nil
		}
		var perm permanent
		if errors.As(err, &perm) {
			return perm.err
		}
		delay := Jitter(wait)
		var a after
		if errors.As(err, &a) {
			err, delay = a.err, a.d
		}
		if attempt >= p.Retries {
			return &Exhausted{Attempts: attempt + 1, Last: err}
		}
		if p.MaxWait > 0 && delay > p.MaxWait {
			delay = p.MaxWait
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return &Abandoned{Cause: ctx.Err(), Last: err}
		case <-t.C:
		}
		wait *= 2
	}
}

// Jitter adds up to a quarter of d, so that clients that failed together don't retry together.
func Jitter(d time.Duration) time.Duration {
	return d + time.Duration(rand.Int64N(int64(d)/4+1))
}

// RetryAfter parses a Retry-After header: delay-seconds or an HTTP date.
func RetryAfter(h string) (time.Duration, bool) {
	if h == "" {
		return 0, false
	}
	if s, err := strconv.Atoi(h); err == nil && s >= 0 {
		return time.Duration(s) * time.Second, true
	}
	if at, err := http.ParseTime(h); err == nil {
		return max(time.Until(at), 0), true
	}
	return 0, false
}

// Transient reports whether a failed round trip may work a moment later. A refused connection or
// a TLS failure will not, and retrying it would only delay the error.
func Transient(err error) bool {
	var ne net.Error
	switch {
	case errors.Is(err, ErrStalled),
		errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, io.EOF),
		errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE),
		errors.As(err, &ne) && ne.Timeout():
		return true
	}
	return false
}

// noAnswer reports whether a round trip failed for want of any answer within its timeout: the
// idle timeout, or the transport's own dial, TLS or response-header timeouts, whichever came
// first.
func noAnswer(err error) bool {
	var ne net.Error
	return errors.Is(err, ErrStalled) || (errors.As(err, &ne) && ne.Timeout())
}

// TransientStatus lists the HTTP answers worth asking again.
var TransientStatus = map[int]bool{
	http.StatusRequestTimeout:      true,
	http.StatusTooManyRequests:     true,
	http.StatusInternalServerError: true,
	http.StatusBadGateway:          true,
	http.StatusServiceUnavailable:  true,
	http.StatusGatewayTimeout:      true,
}

type onceKey struct{}

// Once marks ctx so that a Transport sends its requests once, answering with whatever the first
// attempt got: for a look whose failure its caller can do without, where asking again only
// costs the command time.
func Once(ctx context.Context) context.Context { return context.WithValue(ctx, onceKey{}, true) }

// Transport retries what Transient and TransientStatus call transient, honouring Retry-After. A
// request whose body can't be sent twice (a streamed upload) gets one attempt. The last attempt's
// answer is returned as it is, so that the caller reports the server's own status.
//
// A request that got no answer at all within its timeout is not retried: a server silent that
// long is down or black-holed, and asking again would multiply the wait before the pull
// falls through to the next store (or fails). A body that stalls later is another matter: the
// pull continues it with a Range request.
type Transport struct {
	Inner  http.RoundTripper
	Policy Policy
}

func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	replayable := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	var resp *http.Response
	err := t.Policy.Do(req.Context(), func(attempt int) error {
		if attempt > 0 && req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				return Permanent(err)
			}
			req = req.Clone(req.Context())
			req.Body = body
		}
		last := attempt >= t.Policy.Retries || !replayable || req.Context().Value(onceKey{}) != nil
		r, err := t.Inner.RoundTrip(req)
		if err != nil {
			if last || req.Context().Err() != nil || !Transient(err) || noAnswer(err) {
				return Permanent(err)
			}
			return err
		}
		if !TransientStatus[r.StatusCode] || last {
			resp = r
			return nil
		}
		failure := fmt.Errorf("HTTP %d", r.StatusCode)
		io.Copy(io.Discard, io.LimitReader(r.Body, 64<<10))
		r.Body.Close()
		if d, ok := RetryAfter(r.Header.Get("Retry-After")); ok {
			return After(failure, d)
		}
		return failure
	})
	var ab *Abandoned
	if errors.As(err, &ab) {
		return nil, ab.Cause
	}
	return resp, err
}
