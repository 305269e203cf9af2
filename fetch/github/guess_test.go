package github

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
	"github.com/murmur-nexus/mur/lock"
)

// A scope nobody mapped has only a guessed source: when nothing answers it is asked once, and
// the error says it was a guess. A mapped scope, or one the lock pinned to its source, keeps
// the client's retries; so does a guess that answered (a 503 is an answer).
func TestGuessedSourceIsAskedOnce(t *testing.T) {
	timedOut := func(*http.Request) (*http.Response, error) {
		return nil, &net.DNSError{Err: "i/o timeout", Name: "api.github.com", IsTimeout: true}
	}
	unavailable := func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusServiceUnavailable, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
	}
	pin := &lock.ScopePin{Source: label, OwnerID: ownerID, RepoID: repoID}
	for _, c := range []struct {
		name     string
		mapped   bool
		pin      *lock.ScopePin
		answer   func(*http.Request) (*http.Response, error)
		attempts int32
		guess    bool
	}{
		{"unmapped, nothing answers", false, nil, timedOut, 1, true},
		{"mapped, nothing answers", true, nil, timedOut, 3, false},
		{"unmapped but pinned by the lock", false, pin, timedOut, 3, false},
		{"unmapped, answers 503", false, nil, unavailable, 3, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var n atomic.Int32
			hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
				n.Add(1)
				return c.answer(r)
			})}
			cl := NewClient(ClientOptions{BaseURL: "https://api.github.com", HTTPClient: hc, Retries: 2})
			cl.backoff = 1
			s := NewSource(cl, nil)
			s.Unmapped(func(scope string) bool { return !c.mapped })
			_, err := s.Resolve(context.Background(), grep, "1.0.0", "any", c.pin)
			errtest.WantToken(t, err, errs.Network, "api.github.com")
			if got := n.Load(); got != c.attempts {
				t.Errorf("%d attempts, want %d", got, c.attempts)
			}
			if said := strings.Contains(errs.Message(err), "mapped to no source"); said != c.guess {
				t.Errorf("the error says it was a guess: %v, want %v: %v", said, c.guess, err)
			}
		})
	}
}
