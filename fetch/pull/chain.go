package pull

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
)

// Mirror chains. The stores of a pull are tried in order, as GOPROXY's list is: each entry says
// how a failure falls through to the next place (the next store, then the source).
//   - FallbackNotFound (the default, GOPROXY's ","): only "not found" falls through; any other
//     failure stops the pull and is reported as that store's. An air-gapped fleet that must
//     never reach past its mirror gets exactly that.
//   - FallbackAnyError (GOPROXY's "|"): every failure falls through, so a broken mirror costs a
//     pull nothing but time.
//
// A store that stalls or fails at the network level is marked unhealthy for the rest of the
// process (a circuit breaker), so it costs its timeout once, not once per artifact: the first
// artifact to ask a store whose health is unknown asks alone while the others wait for its
// verdict. For a registry that first question is its ping (Prepare), which every artifact needs
// answered anyway; the manifests are then all asked at once, and the first network failure among
// them marks the store down for whatever asks after it. Which store answered, and why each one before it did not, goes into the result and
// the pull records. Whichever store answers, its bytes are checked against the digest, and
// against the lock's pin, as any store's are: a mirror can serve nothing else.

func (rv *resolver) fallback(st store.Store) store.Fallback {
	if f, ok := rv.fallbacks[st.String()]; ok && f != "" {
		return f
	}
	return store.FallbackNotFound
}

// fallsThrough reports whether a failure of st lets the pull ask the next place.
func (rv *resolver) fallsThrough(st store.Store, err error) bool {
	return rv.fallback(st) == store.FallbackAnyError || errs.TokenOf(err) == errs.NotFound
}

// Skipped is a place a pull asked, or skipped, before the one that answered.
type Skipped struct {
	Place  string `json:"place"`
	Token  string `json:"token"`
	Reason string `json:"reason"`
}

func skippedOf(place string, err error) Skipped {
	return Skipped{Place: place, Token: string(errs.TokenOf(err)), Reason: errs.Message(err)}
}

// StoreHealth remembers, for one process, which stores failed at the network level. It is safe
// for concurrent use; one is shared by every pull of a Puller, and a caller that runs several
// Pulls (warm, one per platform) shares it by setting Puller.Health.
type StoreHealth struct {
	mu     sync.Mutex
	stores map[string]*storeState
	writes mirrorWrites // what each mirror said to this process's first write (mirror_denied.go)
}

type storeState struct {
	down    error         // the failure that marked it unhealthy
	probing chan struct{} // closed when the first request's verdict is in; nil once known
	known   bool
}

// NewStoreHealth returns an empty health record: every store is healthy until it fails.
func NewStoreHealth() *StoreHealth { return &StoreHealth{stores: map[string]*storeState{}} }

func (p *Puller) InitHealth() *StoreHealth {
	if p.Chain.Health == nil {
		p.Chain.Health = NewStoreHealth()
	}
	return p.Chain.Health
}

// enter admits a pull to st. A store already marked unhealthy is refused with the failure that
// marked it. The first caller for a store whose health is unknown probes: it gets probe true and
// must report its first request's outcome with verdict; callers that arrive meanwhile wait.
func (h *StoreHealth) enter(ctx context.Context, st store.Store) (probe bool, err error) {
	key := st.String()
	for {
		h.mu.Lock()
		s := h.stores[key]
		if s == nil {
			s = &storeState{probing: make(chan struct{})}
			h.stores[key] = s
			h.mu.Unlock()
			return true, nil
		}
		if s.down != nil {
			down := s.down
			h.mu.Unlock()
			return false, errs.Wrap(&failedEarlier{down}, errs.TokenOf(down), "skipped: it failed earlier in this run, so mur does not ask it again until the next command (%s)", strings.TrimSuffix(errs.Message(down), "."))
		}
		if s.known {
			h.mu.Unlock()
			return false, nil
		}
		wait := s.probing
		h.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return false, errs.Wrap(ctx.Err(), errs.Network, "gave up waiting for the first answer of %s: %v", key, ctx.Err())
		}
	}
}

// verdict ends a probe: a network failure marks st unhealthy, any answer marks it healthy, and a
// probe cut short by its own context lets the next caller probe again.
func (h *StoreHealth) verdict(ctx context.Context, st store.Store, err error) {
	key := st.String()
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.stores[key]
	if s == nil || s.known || s.down != nil {
		return
	}
	switch {
	case ctx.Err() != nil:
		delete(h.stores, key)
	case errs.TokenOf(err) == errs.Network && err != nil:
		s.down = err
	default:
		s.known = true
	}
	close(s.probing)
}

// failed marks st unhealthy after a network failure in the middle of a pull.
func (h *StoreHealth) failed(ctx context.Context, st store.Store, err error) {
	if ctx.Err() != nil || err == nil || errs.TokenOf(err) != errs.Network {
		return
	}
	key := st.String()
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.stores[key]
	if s == nil {
		s = &storeState{known: true}
		h.stores[key] = s
	}
	if s.down == nil {
		s.down = err
	}
}

// stopped is the error of a pull whose chain stopped at st: its failure, with what was asked
// before it and how to let the chain fall through.
func stopped(what string, st store.Store, err error, skipped []Skipped, remaining int) error {
	var before string
	if len(skipped) > 0 {
		parts := make([]string, len(skipped))
		for i, s := range skipped {
			parts[i] = fmt.Sprintf("%s: %s: %s", s.Place, s.Token, strings.TrimSuffix(s.Reason, "."))
		}
		before = "; before it: " + strings.Join(parts, "; ")
	}
	hint := ""
	if remaining > 0 {
		places := "the place after it was"
		if remaining > 1 {
			places = fmt.Sprintf("the %d places after it were", remaining)
		}
		hint = fmt.Sprintf("; %s falls through only when an artifact is not found there (fallback: not-found), so %s not asked; to fall through on any failure, write it in stores: as {url: %s, fallback: any-error}", st, places, st)
	}
	return errs.Wrap(err, errs.TokenOf(err), "%s: %s: %s%s%s", what, st, strings.TrimSuffix(errs.Message(err), "."), before, hint)
}
