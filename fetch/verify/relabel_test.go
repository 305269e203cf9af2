package verify_test

import (
	"context"
	"strings"
	"testing"

	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/lock"
)

// mur verify holds each pinned blob's packed version to the lock's label, as a pull does: a
// murmur.lock edited to call acme/grep@1.0.0's blob 1.2.0 (the digest kept) is a blob problem,
// and --repair can't repair it (no store can make those bytes another version), so it says what
// to do and changes nothing.
func TestVerifyRefusesAnEditedResolvedVersion(t *testing.T) {
	for _, repair := range []bool{false, true} {
		w := newVerifyWorld(t)
		pulltest.Push(t, w.layout, grep, "1.2.0", "any", pulltest.Pack(t, "grep", "1.2.0", 12))
		err := lock.Update(context.Background(), w.Proj.LockPath(), func(l *lock.Lock) error {
			l.Find("acme/grep").ResolvedVersion = "1.2.0"
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		d := w.digests["acme/grep"]
		in := w.input(t)
		if repair {
			in.Repair = w.repairer()
		}
		rep := w.run(t, in)
		blobs := problems(rep, "blob")
		if len(blobs) != 1 || blobs[0].Repaired || !strings.Contains(blobs[0].Subject, string(d)) ||
			!strings.Contains(blobs[0].Problem, `version "1.0.0"`) || !strings.Contains(blobs[0].Problem, "mur pull --update acme/grep@1.2.0") {
			t.Fatalf("repair %v: blob problems %+v; want the relabeled pin reported, unrepaired, with what to do", repair, blobs)
		}
		if rep.Err(repair) == nil {
			t.Errorf("repair %v: verify passed", repair)
		}
		if l := w.ReadLock(); l.Find("acme/grep").ResolvedVersion != "1.2.0" || !w.CAS.Has(d) {
			t.Errorf("repair %v: verify changed the lock or dropped the blob", repair)
		}
	}
}
