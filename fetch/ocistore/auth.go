package ocistore

import (
	"context"
	"net/http"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// Pool shares one authenticated transport per registry among the stores opened with it, so that
// a process pings a registry and resolves its credentials once, however many stores (prefixes)
// and artifacts it reaches there. The first store opened for a registry sets the transport's
// timeouts and retries; cmd/mur opens every store with the same ones. A nil Pool gives each store
// its own, which is still shared by every artifact that store serves.
type Pool struct {
	mu  sync.Mutex
	reg map[string]*registryAuth
}

// NewPool returns an empty Pool.
func NewPool() *Pool { return &Pool{reg: map[string]*registryAuth{}} }

func (p *Pool) get(key string, make func() *registryAuth) *registryAuth {
	if p == nil {
		return make()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	a := p.reg[key]
	if a == nil {
		a = make()
		p.reg[key] = a
	}
	return a
}

// registryAuth is the authentication state of one registry for the life of the process: the
// ping's challenge and the credentials, found once, and then one transport for every repository
// (anonymous or Basic) or one transport per repository (Bearer). A repository's transport refreshes
// a token for its own pull scope only: go-containerregistry's own transport would grow a single
// token's scope list with every repository it meets, and re-send them all on each refresh. Prepare
// may seed many repositories' transports with one token first (prepare.go). A token that expires
// is refreshed by go-containerregistry's bearer transport on the 401 that says so.
type registryAuth struct {
	reg      name.Registry
	base     http.RoundTripper // retrying, bounded, guarded (see openRegistry)
	keychain authn.Keychain

	mu     sync.Mutex
	pinged chan struct{} // closed when the ping in flight ends; nil when none is
	ch     *transport.Challenge
	auth   authn.Authenticator
	shared http.RoundTripper // anonymous or Basic: one for all repositories
	repos  map[string]*repoAuth

	referrers apiProbe // whether the registry has the referrers API, asked once (referrers_lookup.go)
}

type repoAuth struct {
	done chan struct{}
	rt   http.RoundTripper
	err  error
}

func newRegistryAuth(reg name.Registry, base http.RoundTripper, kc authn.Keychain) *registryAuth {
	return &registryAuth{reg: reg, base: base, keychain: kc, repos: map[string]*repoAuth{}}
}

// challenge pings the registry once, and resolves its credentials once. Concurrent callers wait
// for the one ping in flight; a failure is not kept, so the next caller tries again.
func (a *registryAuth) challenge(ctx context.Context) (*transport.Challenge, authn.Authenticator, error) {
	for {
		a.mu.Lock()
		if a.ch != nil {
			defer a.mu.Unlock()
			return a.ch, a.auth, nil
		}
		if wait := a.pinged; wait != nil {
			a.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		}
		done := make(chan struct{})
		a.pinged = done
		a.mu.Unlock()

		auth, err := a.keychain.Resolve(a.reg)
		var ch *transport.Challenge
		if err == nil {
			ch, err = transport.Ping(ctx, a.reg, a.base)
		}
		a.mu.Lock()
		a.pinged = nil
		if err == nil {
			a.ch, a.auth = ch, auth
		}
		a.mu.Unlock()
		close(done)
		if err != nil {
			return nil, nil, err
		}
		return ch, auth, nil
	}
}

// Credentialed reports whether the registry asked for auth and got the user's credentials: what
// it serves is then not for a mirror the user did not choose (see fetch.Descriptor.Private).
func (s *registryStore) Credentialed() bool {
	a := s.auth
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ch != nil && a.ch.Scheme != "" && a.auth != nil && a.auth != authn.Anonymous
}

// client is the one way to reach the registry for repository r's pull scope: every manifest,
// tag list and blob request goes through the transport it returns, which adds the credentials
// and, for Bearer, the repository's token. It pings and exchanges a token only the first time it
// meets the registry and the repository.
func (s *registryStore) client(ctx context.Context, r name.Repository) (http.RoundTripper, error) {
	a := s.auth
	ch, auth, err := a.challenge(ctx)
	if err != nil {
		return nil, err
	}
	inner := a.inner(ch)
	if !strings.EqualFold(ch.Scheme, "bearer") {
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.shared == nil {
			// For any challenge but Bearer, FromToken ignores the token and returns a transport
			// that sends the credentials (none for anonymous) with each request.
			if a.shared, err = transport.FromToken(a.reg, auth, inner, ch, nil); err != nil {
				return nil, err
			}
		}
		return a.shared, nil
	}
	scope := r.Scope(transport.PullScope)
	for {
		a.mu.Lock()
		e := a.repos[scope]
		if e == nil {
			e = &repoAuth{done: make(chan struct{})}
			a.repos[scope] = e
			a.mu.Unlock()
			tok, err := transport.Exchange(ctx, a.reg, auth, inner, []string{scope}, ch)
			if err == nil {
				e.rt, err = transport.FromToken(a.reg, auth, inner, ch, tok)
			}
			if err != nil {
				e.err = err
				a.mu.Lock()
				delete(a.repos, scope)
				a.mu.Unlock()
			}
			close(e.done)
			return e.rt, err
		}
		a.mu.Unlock()
		select {
		case <-e.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if e.err == nil {
			return e.rt, nil
		}
		// That caller's exchange failed; this one tries for itself.
	}
}

// inner is the transport under the credentials: the ping may have settled on the other scheme
// than the one the repository's name implies (a loopback registry that speaks TLS);
// go-containerregistry's own transport rewrites for that, and FromToken does not.
func (a *registryAuth) inner(ch *transport.Challenge) http.RoundTripper {
	scheme := "https"
	if ch.Insecure {
		scheme = "http"
	}
	return &schemeTransport{inner: a.base, host: a.reg.RegistryStr(), scheme: scheme}
}

// schemeTransport sends the registry's requests with the scheme its ping settled on.
type schemeTransport struct {
	inner        http.RoundTripper
	host, scheme string
}

func (t *schemeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Host == t.host && req.URL.Scheme != t.scheme {
		req = req.Clone(req.Context())
		req.URL.Scheme = t.scheme
	}
	return t.inner.RoundTrip(req)
}
