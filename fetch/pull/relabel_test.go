package pull_test

import (
	"context"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	fstore "github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
	"github.com/murmur-nexus/mur/lock"
)

// relabeled is a project that pulled acme/grep@1.0.0 and whose murmur.lock was then edited to
// call that blob 1.2.0, the digest kept: what a hand edit (or a hostile change in a cloned
// project) makes of a pin. The store serves 1.2.0 too, as other bytes.
func relabeled(t *testing.T) (*pulltest.World, fstore.Store, digest.Digest) {
	t.Helper()
	w := pulltest.NewWorld(t)
	layout, digests := w.PulledPair()
	pulltest.Push(t, layout, grep, "1.2.0", "any", pulltest.Pack(t, "grep", "1.2.0", 12))
	err := lock.Update(context.Background(), w.Proj.LockPath(), func(l *lock.Lock) error {
		l.Find("acme/grep").ResolvedVersion = "1.2.0"
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return w, layout, digests["acme/grep"]
}

// A pull whose blob the CAS holds holds it to the lock's label, as a pull on a fresh home holds
// the blob it downloads: murmur.lock edited to call acme/grep@1.0.0's blob 1.2.0 is refused
// (lock-conflict, naming the pin, what the blob says it is and what to do), and nothing changes.
func TestAWarmPullRefusesAnEditedResolvedVersion(t *testing.T) {
	w, layout, d := relabeled(t)
	p := w.Puller(layout)
	p.Platform = ""
	before := w.State()
	_, err := w.Pull(p, pulltest.Req(grep, "1.2.0"))
	errtest.WantToken(t, err, errs.LockConflict, "murmur.lock pins acme/grep@1.2.0 to "+string(d), `version "1.0.0"`, "mur pull --update acme/grep@1.2.0")
	w.AssertUnchanged(before)

	// A fresh home refuses it too, as it did before a warm one did.
	fresh := pulltest.NewWorld(t)
	fresh.Proj = w.Proj
	if _, err := fresh.Pull(fresh.Puller(layout), pulltest.Req(grep, "1.2.0")); err == nil || fresh.CAS.Has(d) {
		t.Fatalf("a fresh home pulled the relabeled pin: %v", err)
	}
}
