package pull_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
)

// projectMirroring is a Puller whose mirror only the project names, with the project's own
// stores, and the lines it warned.
func projectMirroring(w *pulltest.World, mirror store.Store, own []store.Store, stores ...store.Store) (*pull.Puller, *[]string) {
	pl := mirroring(w, mirror, stores...)
	pl.Mirror.FromProject = true
	pl.Mirror.ProjectStores = map[string]bool{}
	for _, st := range own {
		pl.Mirror.ProjectStores[st.String()] = true
	}
	var mu sync.Mutex
	warned := &[]string{}
	pl.Report.Warn = func(msg string) { mu.Lock(); *warned = append(*warned, msg); mu.Unlock() }
	return pl, warned
}

func wantInMirror(t *testing.T, mirror store.Store, n ref.Name, in bool) {
	t.Helper()
	_, err := mirror.Resolve(context.Background(), n, "1.0.0", "any")
	if in && err != nil || !in && !errors.Is(err, errs.NotFound) {
		t.Fatalf("%s in the mirror: %v, want it there %v", n, err, in)
	}
}

// A cloned project's mirror receives what the project's own stores serve; what a store of the
// home's serves without credentials (an oci-layout share) goes to the home's mirror only, on the
// pull that fetched it and on any cache hit after, however many artifacts: one line says so.
func TestProjectMirrorGetsOnlyWhatTheProjectsStoresServe(t *testing.T) {
	t.Parallel()
	share, own := pulltest.LayoutStore(t), pulltest.LayoutStore(t)
	_, mirror, _ := mirrorWorld(t)
	sed := ref.Name{Scope: "acme", Name: "sed"}
	reqs := pulltest.PushMany(t, share, "tool", 3, 0, 480)
	pulltest.Push(t, own, sed, "1.0.0", "any", pulltest.Pack(t, "sed", "1.0.0", 489))
	reqs = append(reqs, pulltest.Req(sed, "1.0.0"))

	w := pulltest.NewWorld(t)
	pl, warned := projectMirroring(w, mirror, []store.Store{own}, own, share)
	for _, r := range w.MustPull(pl, reqs...) {
		switch {
		case r.Name == sed.String():
			if r.Mirror == nil || !r.Mirror.Pushed {
				t.Fatalf("the project's own artifact was not written through: %+v", r.Mirror)
			}
		case r.Mirror == nil || r.Mirror.Pushed || !strings.Contains(r.Mirror.Error, "a store of your own"):
			t.Fatalf("%s from the home's store: mirror %+v", r.Name, r.Mirror)
		}
	}
	if len(*warned) != 1 || !strings.Contains((*warned)[0], mirror.String()) || !strings.Contains((*warned)[0], "$MURMUR_HOME/config.yaml") {
		t.Fatalf("warned %q, want one line naming the mirror", *warned)
	}
	for _, r := range reqs {
		wantInMirror(t, mirror, r.Name, r.Name == sed)
	}

	// A cache hit: the records say where the blob came from.
	pl, warned = projectMirroring(w, mirror, []store.Store{own}, own, share)
	if r := w.MustPull(pl, reqs[0])[0]; !r.CacheHit || r.Mirror == nil || r.Mirror.Pushed || len(*warned) != 1 {
		t.Fatalf("the cache hit: %+v (mirror %+v), warned %q", r, r.Mirror, *warned)
	}
	wantInMirror(t, mirror, reqs[0].Name, false)

	// The home's mirror gets it.
	if r := w.MustPull(mirroring(w, mirror, own, share), reqs[0])[0]; r.Mirror == nil || !r.Mirror.Pushed {
		t.Fatalf("the home's mirror: %+v", r.Mirror)
	}
	wantInMirror(t, mirror, reqs[0].Name, true)
}

// A blob a project's own store served once is written through on a later cache hit, even to a
// project mirror set up after; one the home's store served is not, whatever store resolves it now.
func TestProjectMirrorCacheHitFollowsWhereTheBlobCameFrom(t *testing.T) {
	t.Parallel()
	share, own := pulltest.LayoutStore(t), pulltest.LayoutStore(t)
	_, mirror, _ := mirrorWorld(t)
	sed := ref.Name{Scope: "acme", Name: "sed"}
	for _, st := range []store.Store{share, own} {
		pulltest.Push(t, st, grep, "1.0.0", "any", pulltest.Pack(t, "grep", "1.0.0", 490))
	}
	pulltest.Push(t, own, sed, "1.0.0", "any", pulltest.Pack(t, "sed", "1.0.0", 491))
	w := pulltest.NewWorld(t)
	w.MustPull(w.Puller(share), pulltest.Req(grep, "1.0.0")) // before the project had a mirror
	w.MustPull(w.Puller(own), pulltest.Req(sed, "1.0.0"))

	pl, _ := projectMirroring(w, mirror, []store.Store{own}, own)
	for _, r := range w.MustPull(pl, pulltest.Req(grep, "1.0.0"), pulltest.Req(sed, "1.0.0")) {
		if !r.CacheHit || r.Mirror == nil || r.Mirror.Pushed != (r.Name == sed.String()) {
			t.Fatalf("%s: cache hit %v, mirror %+v", r.Name, r.CacheHit, r.Mirror)
		}
	}
	wantInMirror(t, mirror, sed, true)
	wantInMirror(t, mirror, grep, false)
}
