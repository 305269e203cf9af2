package ocistore

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/murmur-nexus/mur/internal/ref"
)

// scopesPerToken bounds the repositories one token request names, so that its URL stays well
// under the 8 KiB that servers commonly accept.
const scopesPerToken = 50

// Prepare readies the registry for a pull of names, before any of them is resolved: one ping,
// and for a Bearer registry one token exchange for all of their repositories (per 50), instead
// of one per repository on the way. Each repository still gets a transport of its own, so that a
// token that expires is refreshed for that repository alone. Its error is the registry's first
// answer, as a pull's health check wants it.
func (s *registryStore) Prepare(ctx context.Context, names []ref.Name) error {
	var repos []name.Repository
	for _, n := range names {
		r, err := s.repository(s.repoPath(n))
		if err != nil {
			return err
		}
		repos = append(repos, r)
	}
	what := fmt.Sprintf("reaching the registry of %s", s.addr)
	if err := s.auth.prepare(ctx, repos); err != nil {
		return s.classify(err, what)
	}
	return nil
}

// prepare takes the one ping, and one token for every repository in repos that has none yet.
func (a *registryAuth) prepare(ctx context.Context, repos []name.Repository) error {
	ch, auth, err := a.challenge(ctx)
	if err != nil {
		return err
	}
	if !strings.EqualFold(ch.Scheme, "bearer") || len(repos) == 0 {
		return nil
	}
	inner := a.inner(ch)
	// Reserve the repositories no one holds or is fetching a token for: client waits on these.
	var scopes []string
	var mine []*repoAuth
	a.mu.Lock()
	for _, r := range repos {
		scope := r.Scope(transport.PullScope)
		if a.repos[scope] != nil {
			continue
		}
		e := &repoAuth{done: make(chan struct{})}
		a.repos[scope] = e
		scopes, mine = append(scopes, scope), append(mine, e)
	}
	a.mu.Unlock()
	var first error
	for start := 0; start < len(scopes); start += scopesPerToken {
		end := min(start+scopesPerToken, len(scopes))
		tok, err := transport.Exchange(ctx, a.reg, auth, inner, scopes[start:end], ch)
		for i := start; i < end; i++ {
			e := mine[i]
			if err == nil {
				e.rt, e.err = transport.FromToken(a.reg, auth, inner, ch, tok)
			} else {
				e.err = err
			}
			if e.err != nil {
				a.mu.Lock()
				delete(a.repos, scopes[i])
				a.mu.Unlock()
				first = cmpErr(first, e.err)
			}
			close(e.done)
		}
	}
	return first
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}
