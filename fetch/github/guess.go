package github

import (
	"context"
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

type guessKey struct{}

// asGuess marks the requests made under ctx as a guessed source's: one attempt when nothing
// answers.
func asGuess(ctx context.Context) context.Context { return context.WithValue(ctx, guessKey{}, true) }

func isGuess(ctx context.Context) bool { v, _ := ctx.Value(guessKey{}).(bool); return v }

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
	return errs.Wrap(err, errs.Network, "scope %s is mapped to no source, and its default %s did not answer (asked once, not retried): %s; if the scope has a GitHub source, map it under sources: in config.yaml (%s: github:OWNER/REPO)", scope, label, errs.Message(err), scope)
}
