package fetch_test

import (
	"context"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
	"github.com/murmur-nexus/mur/lock"
)

// relabeled is a project that pulled acme/grep@1.0.0 and whose murmur.lock was then edited to
// call that blob 1.2.0, the digest kept: what a hand edit (or a hostile change in a cloned
// project) makes of a pin. The store serves 1.2.0 too, as other bytes.
func relabeled(t *testing.T) (*verifyWorld, digest.Digest) {
	t.Helper()
	w := newVerifyWorld(t)
	push(t, w.layout, grep, "1.2.0", "any", pack(t, "grep", "1.2.0", 12))
	err := lock.Update(context.Background(), w.proj.LockPath(), func(l *lock.Lock) error {
		l.Find("acme/grep").ResolvedVersion = "1.2.0"
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return w, w.digests["acme/grep"]
}

// The blob's packed version is held to the lock's label on every path, as a fresh home holds it
// when it downloads the blob: a warm pull refuses the pin, and changes nothing; verify reports
// it, and --repair can't repair it (no store can make those bytes another version), so it says
// what to do.
func TestAnEditedResolvedVersionIsRefusedEverywhere(t *testing.T) {
	t.Run("a fresh home", func(t *testing.T) {
		w, d := relabeled(t)
		fresh := newWorld(t)
		fresh.proj = w.proj
		_, err := fresh.pull(fresh.puller(w.layout), req(grep, "1.2.0"))
		if err == nil || fresh.cas.Has(d) {
			t.Fatalf("a fresh home pulled the relabeled pin: %v", err)
		}
	})
	t.Run("a warm pull", func(t *testing.T) {
		w, d := relabeled(t)
		before := w.state()
		_, err := w.pull(w.repairer(), req(grep, "1.2.0"))
		errtest.WantToken(t, err, errs.LockConflict, "acme/grep@1.2.0", string(d), `version "1.0.0"`, "murmur.lock")
		w.assertUnchanged(before)
	})
	for _, repair := range []bool{false, true} {
		name := map[bool]string{false: "verify", true: "verify --repair"}[repair]
		t.Run(name, func(t *testing.T) {
			w, d := relabeled(t)
			in := w.input(t)
			if repair {
				in.Repair = w.repairer()
			}
			rep := w.run(t, in)
			blobs := problems(rep, "blob")
			if len(blobs) != 1 || blobs[0].Repaired || !strings.Contains(blobs[0].Subject, string(d)) ||
				!strings.Contains(blobs[0].Problem, `version "1.0.0"`) || !strings.Contains(blobs[0].Problem, "mur pull --update acme/grep@1.2.0") {
				t.Fatalf("blob problems %+v; want the relabeled pin reported, unrepaired, with what to do", blobs)
			}
			if rep.Err(repair) == nil {
				t.Error("verify passed")
			}
			if l := w.readLock(); l.Find("acme/grep").ResolvedVersion != "1.2.0" || !w.cas.Has(d) {
				t.Error("verify changed the lock or dropped the blob")
			}
		})
	}
}
