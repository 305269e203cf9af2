package github

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
)

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A host name that does not exist is not asked again: the resolver's answer is definite, and
// retrying it only delayed the error (4 lookups for a scope nobody mapped). A resolver that
// failed for now is retried as before.
func TestNoSuchHostIsNotRetried(t *testing.T) {
	for _, c := range []struct {
		name     string
		dns      *net.DNSError
		attempts int32
	}{
		{"no such host", &net.DNSError{Err: "no such host", Name: "api.github.com", IsNotFound: true}, 1},
		{"resolver timed out", &net.DNSError{Err: "i/o timeout", Name: "api.github.com", IsTimeout: true}, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			var n atomic.Int32
			hc := &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
				n.Add(1)
				return nil, c.dns
			})}
			cl := NewClient(ClientOptions{BaseURL: "https://api.github.com", HTTPClient: hc, Retries: 2})
			cl.backoff = 1
			_, err := cl.Repo(context.Background(), owner, repo)
			errtest.WantToken(t, err, errs.Network, "api.github.com")
			if got := n.Load(); got != c.attempts {
				t.Fatalf("%d attempts, want %d", got, c.attempts)
			}
		})
	}
}
