package fetch_test

import (
	"os"
	"testing"

	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
)

// A store whose tag moved away from the pin (and which no longer holds the pinned blob) is a
// conflict with the lock, even with fallback: any-error: the chain must not pass the pull on to
// the next store as if the first had merely failed.
func TestChainStopsAtATagMovedAwayFromThePin(t *testing.T) {
	w := newWorld(t)
	pinned, moved := pack(t, "grep", "1.0.0", 651), pack(t, "grep", "1.0.0", 652)
	good, hostile := layoutStore(t), layoutStore(t)
	push(t, good, grep, "1.0.0", "any", pinned)
	push(t, hostile, grep, "1.0.0", "any", moved)
	w.mustPull(w.puller(good), req(grep, "1.0.0"))
	must(t, os.Remove(w.cas.Path(pinned.digest()))) // the pin stays; the blob must come again

	pl := w.puller(hostile, good)
	pl.Chain.Fallbacks = map[string]store.Fallback{hostile.String(): store.FallbackAnyError}
	_, err := w.pull(pl, req(grep, "1.0.0"))
	errtest.WantToken(t, err, errs.LockConflict, hostile.String())
	if w.cas.Has(pinned.digest()) || w.cas.Has(moved.digest()) {
		t.Fatal("the pull went on past the conflict")
	}
}
