package fetch_test

import (
	"context"
	"testing"

	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/ref"
)

// The world of the verbs' tests is pulltest's, pulling through fetch's Puller: its pins go
// through the lock's one transition, as a command's do.

var grep = ref.Name{Scope: "acme", Name: "grep"}

type world struct{ *pulltest.World }

func newWorld(t testing.TB) *world { return &world{pulltest.NewWorld(t)} }

// puller is pulltest's Puller as a command holds it.
func (w *world) puller(stores ...store.Store) *fetch.Puller {
	return &fetch.Puller{Puller: w.World.Puller(stores...)}
}

func (w *world) pull(p *fetch.Puller, reqs ...pull.Request) ([]pull.Result, error) {
	return p.Pull(context.Background(), w.Proj, reqs)
}

func (w *world) mustPull(p *fetch.Puller, reqs ...pull.Request) []pull.Result {
	w.T.Helper()
	res, err := w.pull(p, reqs...)
	if err != nil {
		w.T.Fatalf("pull: %v", err)
	}
	return res
}
