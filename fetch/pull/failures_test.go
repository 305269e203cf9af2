package pull_test

import (
	"context"
	"strings"
	"testing"

	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
)

// downSource is a source whose host can't be reached, as GitHub is for a machine without DNS.
type downSource struct{}

func (downSource) Label(scope string) (string, bool) {
	return "github:" + scope + "/murmur-artifacts", true
}
func (downSource) Resolve(context.Context, ref.Name, string, string, *lock.ScopePin) (store.Sourced, error) {
	return store.Sourced{}, errs.New(errs.Network, "can't reach api.github.com: dial tcp: lookup api.github.com: no such host")
}
func (downSource) Fetch(context.Context, ref.Name, string, string, *lock.ScopePin, store.Scratch) (store.Sourced, error) {
	return store.Sourced{}, errs.New(errs.Network, "can't reach api.github.com: dial tcp: lookup api.github.com: no such host")
}

func TestEveryPlaceSaysWhyInOneMessage(t *testing.T) {
	t.Parallel()
	w := pulltest.NewWorld(t)
	st := pulltest.LayoutStore(t)
	pulltest.Push(t, st, grep, "1.0.0", "any", pulltest.Pack(t, "grep", "1.0.0", 1))
	p := w.Puller(st)
	p.Source = downSource{}
	before := w.State()
	_, err := w.Pull(p, pulltest.Req(grep, "1.0.1"))
	// The mistyped version's "not found" survives beside the source's DNS error, and is the top
	// token: the store answered, the source could not be reached.
	errtest.WantToken(t, err, errs.NotFound, "acme/grep@1.0.1 was not found in any of the 2 places asked:\n",
		"\n  not-found: "+st.String()+" has no acme/grep@1.0.1; it holds, newest first: 1.0.0;",
		"\n  network: github:acme/murmur-artifacts: can't reach api.github.com")
	w.AssertUnchanged(before)
}

func TestNoStoreAndSourceDown(t *testing.T) {
	t.Parallel()
	w := pulltest.NewWorld(t)
	p := w.Puller()
	p.Source = downSource{}
	_, err := w.Pull(p, pulltest.Req(grep, "1.0.0"))
	errtest.WantToken(t, err, errs.Network, "acme/grep@1.0.0", "no such host", "no store is configured", `stores: ["oci://`, "--store")
}

// Advice about the source that was not asked bears on a not-found only: after a store that
// could not answer, it would send the reader the wrong way.
func TestSourcesHintOnlyForNotFound(t *testing.T) {
	t.Parallel()
	w := pulltest.NewWorld(t)
	stores := []pull.Request{{Asked: "acme/grep@1.0.0", Name: grep, Version: "1.0.0", From: []string{pull.FromStores}}}
	_, err := w.Pull(w.Puller(pulltest.OpenStore(t, "oci://127.0.0.1:1/murmur", ocistore.Options{Retries: -1})), stores...)
	if errs.TokenOf(err) != errs.Network || strings.Contains(errs.Message(err), "sources were not granted") {
		t.Fatalf("a store that can't be reached: %v", err)
	}
	// The scope's source could have had it: named, in one clause.
	p := w.Puller(pulltest.LayoutStore(t))
	p.Source = downSource{}
	_, err = w.Pull(p, stores...)
	errtest.WantToken(t, err, errs.NotFound, "; github:acme/murmur-artifacts was not asked: install.from is [stores]; add sources to it to ask")
	// A scope only guessed at: no source could have had it, so none is named.
	p.Source = guessedSource{downSource{}}
	_, err = w.Pull(p, stores...)
	if errs.TokenOf(err) != errs.NotFound || strings.Contains(errs.Message(err), "not asked") {
		t.Fatalf("a guessed source was named: %v", err)
	}
}

// guessedSource is a source config.yaml maps no scope to (github.Source.Guess).
type guessedSource struct{ downSource }

func (guessedSource) Guess(string) bool { return true }

func TestAllNotFoundIsNotFound(t *testing.T) {
	t.Parallel()
	w := pulltest.NewWorld(t)
	a, b := pulltest.LayoutStore(t), pulltest.LayoutStore(t)
	_, err := w.Pull(w.Puller(a, b), pull.Request{Asked: "acme/grep@2.0.0", Name: grep, Version: "2.0.0", From: []string{pull.FromStores}})
	errtest.WantToken(t, err, errs.NotFound, "acme/grep@2.0.0 was not found in any of the 2 places asked:", "\n  not-found: "+a.String(), "\n  not-found: "+b.String())
	if strings.Contains(errs.Message(err), "no store is configured") {
		t.Fatalf("two stores were configured: %s", errs.Message(err))
	}
}
