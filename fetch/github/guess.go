package github

import (
	"errors"
	"net/url"

	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/lock"
)

// A scope that config.yaml maps nowhere, and that the lock has never pinned to a source, is
// served if at all by lock.DefaultSource: a guess, which many scopes (a store's only, a typo)
// never had. Such a source is asked once: when nothing answers (no such host, a refused or
// silent connection), mur does not retry, and says the guess was not reachable, so that the
// stores' own answers (a layout's not-found) lead the error instead of a DNS retry loop.

// Unmapped tells s which scopes nobody mapped to a source; nil (the default) treats every scope
// as mapped, asked with the client's retries.
func (s *Source) Unmapped(f func(scope string) bool) { s.unmapped = f }

// guessed reports whether scope's source is only the default guess: not mapped, not pinned.
func (s *Source) guessed(scope string, pin *lock.ScopePin) bool {
	return pin == nil && s.unmapped != nil && s.unmapped(scope)
}

// guessing is a copy of c for a guessed source's requests: one attempt when nothing answers.
func (c *Client) guessing() *Client {
	g := *c
	g.oneTry = true
	return &g
}

// unanswered reports whether err is a request that got no HTTP answer at all.
func unanswered(err error) bool {
	var ue *url.Error
	return errors.As(err, &ue)
}

// notReachable says that scope's guessed source could not be reached, keeping err's detail.
func notReachable(err error, scope, label string) error {
	if !unanswered(err) || errs.TokenOf(err) != errs.Network {
		return err
	}
	// The dial's own error says why; the request's URL and method around it say nothing the
	// label does not.
	var ue *url.Error
	errors.As(err, &ue)
	return errs.Wrap(err, errs.Network, "%s did not answer (asked once: scope %s is mapped to no source, and this is only its default): %v", label, scope, ue.Err)
}

// Guess reports whether scope's source is only the default guess: no sources: entry maps it.
// A pull that did not ask sources names a mapped one, never a guess.
func (s *Source) Guess(scope string) bool { return s.unmapped != nil && s.unmapped(scope) }
