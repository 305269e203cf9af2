package fetch_test

import (
	"context"
	"testing"

	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/fetch/config"
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
	return fetch.NewPuller(w.World.Puller(stores...))
}

// commandPuller is the Puller a command assembles from o for the world's project, as pulltest's
// pulls for linux-x86_64: no store, src the source of every scope.
func (w *world) commandPuller(o fetch.PullerOptions, src store.Source) *fetch.Puller {
	w.T.Helper()
	ws := &fetch.Workspace{Project: w.Proj, Config: &config.Config{}}
	o.CAS, o.Platform, o.Connections = w.CAS, "linux-x86_64", 1
	p, err := ws.Puller(o.OpenWith(nil, nil, func(func(string) string) store.Source { return src }))
	if err != nil {
		w.T.Fatal(err)
	}
	return p
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
