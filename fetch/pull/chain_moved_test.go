package pull_test

import (
	"os"
	"testing"

	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
)

// A store whose tag moved away from the pin (and which no longer holds the pinned blob) is a
// conflict with the lock, even with fallback: any-error: the chain must not pass the pull on to
// the next store as if the first had merely failed.
func TestChainStopsAtATagMovedAwayFromThePin(t *testing.T) {
	t.Parallel()
	w := pulltest.NewWorld(t)
	pinned, moved := pulltest.Pack(t, "grep", "1.0.0", 651), pulltest.Pack(t, "grep", "1.0.0", 652)
	good, hostile := pulltest.LayoutStore(t), pulltest.LayoutStore(t)
	pulltest.Push(t, good, grep, "1.0.0", "any", pinned)
	pulltest.Push(t, hostile, grep, "1.0.0", "any", moved)
	w.MustPull(w.Puller(good), pulltest.Req(grep, "1.0.0"))
	must(t, os.Remove(w.CAS.Path(pinned.Digest()))) // the pin stays; the blob must come again

	pl := w.Puller(hostile, good)
	pl.Chain.Fallbacks = map[string]store.Fallback{hostile.String(): store.FallbackAnyError}
	_, err := w.Pull(pl, pulltest.Req(grep, "1.0.0"))
	errtest.WantToken(t, err, errs.LockConflict, hostile.String())
	if w.CAS.Has(pinned.Digest()) || w.CAS.Has(moved.Digest()) {
		t.Fatal("the pull went on past the conflict")
	}
}
