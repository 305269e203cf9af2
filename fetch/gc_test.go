package fetch_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
	"github.com/murmur-nexus/mur/internal/lockedfile"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/internal/slowdown"
	"github.com/murmur-nexus/mur/lock"
)

var bg = context.Background()

func gcRemoved(rep fetch.GCReport) []digest.Digest {
	var out []digest.Digest
	for _, b := range rep.Blobs {
		out = append(out, b.Digest)
	}
	slices.Sort(out)
	return out
}

// Every pull registers its project's lock, so gc run anywhere keeps what any project pins; a
// project that is gone is forgotten and its blobs go.
func TestGCKeepsWhatRegisteredLocksPin(t *testing.T) {
	w := newWorld(t)
	st := pulltest.LayoutStore(t)
	p := pulltest.Pack(t, "grep", "1.0.0", 201)
	pulltest.Push(t, st, grep, "1.0.0", "any", p)
	w.mustPull(w.puller(st), pulltest.Req(grep, "1.0.0"))
	stray := w.Ingest(pulltest.Pack(t, "stray", "1.0.0", 202))

	rep, err := fetch.GC(bg, fetch.GCInput{CAS: w.CAS, OlderThan: 0})
	if err != nil {
		t.Fatal(err)
	}
	if got := gcRemoved(rep); !reflect.DeepEqual(got, []digest.Digest{stray}) {
		t.Fatalf("gc removed %v, want only the unpinned %s", got, stray)
	}
	lockPath, _ := filepath.Abs(w.Proj.LockPath())
	if !reflect.DeepEqual(rep.Roots, []string{lockPath}) || rep.Pinned != 1 {
		t.Fatalf("roots %v, pinned %d", rep.Roots, rep.Pinned)
	}
	if !w.CAS.Has(p.Digest()) {
		t.Fatal("gc removed a blob a registered lock pins")
	}
	// The project goes: its root is forgotten, and its blobs with it.
	if err := os.RemoveAll(w.Proj.Dir); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(cas.RootGrace + time.Minute)
	dry, err := fetch.GC(bg, fetch.GCInput{CAS: w.CAS, OlderThan: 0, DryRun: true, Now: later})
	if err != nil || !reflect.DeepEqual(dry.PrunedRoots, []string{lockPath}) || !reflect.DeepEqual(gcRemoved(dry), []digest.Digest{p.Digest()}) {
		t.Fatalf("dry run after the project went = %+v, %v", dry, err)
	}
	// Just after, the root may be one registered for a lock about to be written: it stays, though
	// the lock, being gone, pins nothing.
	rep, err = fetch.GC(bg, fetch.GCInput{CAS: w.CAS, OlderThan: 0})
	if err != nil || len(rep.PrunedRoots) != 0 || !reflect.DeepEqual(rep.Roots, []string{lockPath}) || w.CAS.Has(p.Digest()) {
		t.Fatalf("gc within the root's grace = %+v, %v", rep, err)
	}
	rep, err = fetch.GC(bg, fetch.GCInput{CAS: w.CAS, OlderThan: 0, Now: later})
	if err != nil || !reflect.DeepEqual(rep.PrunedRoots, []string{lockPath}) {
		t.Fatalf("gc after the grace = %+v, %v", rep, err)
	}
	if rep, _ := fetch.GC(bg, fetch.GCInput{CAS: w.CAS, OlderThan: 0, Now: later}); len(rep.PrunedRoots) != 0 || len(rep.Roots) != 0 {
		t.Fatalf("the forgotten root came back: %+v", rep)
	}
}

// Inside a project gc keeps that project's pins, registered or not (a lock committed by a
// teammate and never pulled here), and every lock given with --keep.
func TestGCKeepsTheCurrentProjectAndKeepLocks(t *testing.T) {
	w := newWorld(t)
	a, b := pulltest.Pack(t, "grep", "1.0.0", 203), pulltest.Pack(t, "seed", "1.0.0", 204)
	da, db := w.Ingest(a), w.Ingest(b)
	w.PinAll([]pulltest.Pin{{Name: "acme/grep", Version: "1.0.0", Platform: "any", Blob: a.Zip}})
	other := filepath.Join(t.TempDir(), "murmur.lock")
	lock.Update(bg, other, func(l *lock.Lock) error {
		return l.Upsert("acme/seed", "1.0.0", "any", db.Encoded(), "operator", false)
	})
	rep, err := fetch.GC(bg, fetch.GCInput{CAS: w.CAS, Project: w.Proj.Dir, KeepLocks: []string{other}, OlderThan: 0})
	if err != nil || len(rep.Blobs) != 0 || rep.Pinned != 2 {
		t.Fatalf("gc = %+v, %v; want both blobs kept", rep, err)
	}
	rep, err = fetch.GC(bg, fetch.GCInput{CAS: w.CAS, OlderThan: 0, DryRun: true})
	if err != nil || len(rep.Blobs) != 2 {
		t.Fatalf("gc outside the project and without --keep would remove %v, %v; want both", gcRemoved(rep), err)
	}
	_, err = fetch.GC(bg, fetch.GCInput{CAS: w.CAS, KeepLocks: []string{filepath.Join(t.TempDir(), "typo.lock")}, OlderThan: 0})
	errtest.WantToken(t, err, errs.Usage, "typo.lock")
	if !w.CAS.Has(da) || !w.CAS.Has(db) {
		t.Fatal("a gc refused for its --keep removed blobs")
	}
}

// A registered lock gc can't read stops it: it can't know what that project pins.
func TestGCRefusesAnUnreadableRegisteredLock(t *testing.T) {
	w := newWorld(t)
	st := pulltest.LayoutStore(t)
	p := pulltest.Pack(t, "grep", "1.0.0", 205)
	pulltest.Push(t, st, grep, "1.0.0", "any", p)
	w.mustPull(w.puller(st), pulltest.Req(grep, "1.0.0"))
	stray := w.Ingest(pulltest.Pack(t, "stray", "1.0.0", 206))
	os.WriteFile(w.Proj.LockPath(), []byte("lock_version: 99\n"), 0o644)
	_, err := fetch.GC(bg, fetch.GCInput{CAS: w.CAS, OlderThan: 0})
	errtest.WantToken(t, err, errs.InvalidLock, w.Proj.LockPath(), "removed nothing")
	if !w.CAS.Has(p.Digest()) || !w.CAS.Has(stray) {
		t.Fatal("gc removed blobs although a registered lock could not be read")
	}
}

// cache.max_size trims after a pull: unpinned blobs go, least recently used first, with what
// derives from them; what the pull pinned stays.
func TestPullTrimsToTheCacheCap(t *testing.T) {
	w := newWorld(t)
	st := pulltest.LayoutStore(t)
	p := pulltest.Pack(t, "grep", "1.0.0", 207)
	pulltest.Push(t, st, grep, "1.0.0", "any", p)
	older, newer := w.Ingest(pulltest.Pack(t, "old", "1.0.0", 208)), w.Ingest(pulltest.Pack(t, "new", "1.0.0", 209))
	for i, d := range []digest.Digest{older, newer} {
		at := time.Now().Add(-time.Duration(10-i) * time.Hour)
		os.Chtimes(w.CAS.Path(d), at, at)
		os.Chtimes(filepath.Join(w.CAS.Root(), "uses", d.Encoded()), at, at)
	}
	size := func(d digest.Digest) int64 { info, _ := w.CAS.Stat(d); return info.Size }
	var evicted []digest.Digest
	var warnings []string
	pl := w.puller(st)
	evict := func(ctx context.Context, d digest.Digest, dryRun bool) []string {
		evicted = append(evicted, d)
		return nil
	}
	pl.SetTrim(int64(len(p.Zip))+size(newer), evict) // room for the pull and one more
	pl.Pipeline().Report.Warn = func(s string) { warnings = append(warnings, s) }
	w.mustPull(pl, pulltest.Req(grep, "1.0.0"))
	if w.CAS.Has(older) || !w.CAS.Has(newer) || !w.CAS.Has(p.Digest()) {
		t.Fatalf("after the trim: older %v, newer %v, pulled %v; want only the least recently used gone", w.CAS.Has(older), w.CAS.Has(newer), w.CAS.Has(p.Digest()))
	}
	if !reflect.DeepEqual(evicted, []digest.Digest{older}) || len(warnings) != 0 {
		t.Fatalf("evicted %v, warnings %q", evicted, warnings)
	}
	// A cap below what is pinned: the pinned blob stays and the pull says why the cap is not met.
	pl.SetTrim(10, evict)
	w.mustPull(pl, pulltest.Req(grep, "1.0.0"))
	if !w.CAS.Has(p.Digest()) || w.CAS.Has(newer) {
		t.Fatal("a trim below the pinned size removed the pinned blob, or kept the unpinned one")
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "over cache.max_size") {
		t.Fatalf("warnings %q", warnings)
	}
}

// A blob the current pull takes from the CAS is leased until its lock pins it: a gc that runs
// meanwhile, from anywhere, leaves it. The test holds the project's lock guard, so that the pull
// waits between finding the blob and pinning it, and runs gc there.
func TestPullLeasesWhatItBringsIn(t *testing.T) {
	w := newWorld(t)
	st := pulltest.LayoutStore(t)
	p := pulltest.Pack(t, "grep", "1.0.0", 210)
	pulltest.Push(t, st, grep, "1.0.0", "any", p)
	d := w.Ingest(p) // in the CAS already, unpinned and old: the pull resolves to it
	old := time.Now().Add(-time.Hour)
	os.Chtimes(w.CAS.Path(d), old, old)
	os.Chtimes(filepath.Join(w.CAS.Root(), "uses", d.Encoded()), old, old)
	unlock, err := lockedfile.Lock(bg, lock.GuardPath(w.Proj.LockPath()))
	if err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		res []pull.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := w.pull(w.puller(st), pulltest.Req(grep, "1.0.0"))
		done <- outcome{res, err}
	}()
	if !waitLeased(t, w.CAS, d) {
		unlock()
		<-done
		t.Fatal("the pull never leased the digest it resolved to")
	}
	// The lock is registered before it is written, so that a kill between the write and the
	// end of the lease leaves no pin that gc can't see.
	lockPath, _ := filepath.Abs(w.Proj.LockPath())
	registered := false
	for deadline := time.Now().Add(slowdown.Scale(10 * time.Second)); !registered && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		roots, _ := w.CAS.Roots(bg, time.Now(), true)
		registered = slices.Contains(roots.Live, lockPath)
	}
	rep, err := fetch.GC(bg, fetch.GCInput{CAS: w.CAS, OlderThan: 0})
	unlock()
	o := <-done
	if !registered {
		t.Fatal("the pull did not register its lock before writing it")
	}
	if err != nil || o.err != nil {
		t.Fatalf("gc: %v; pull: %v", err, o.err)
	}
	if rep.Leases != 1 || len(rep.Blobs) != 0 || !w.CAS.Has(d) {
		t.Fatalf("gc during the pull removed %v (leases %d): the pull pinned a blob that is gone", gcRemoved(rep), rep.Leases)
	}
	if !o.res[0].CacheHit {
		t.Fatalf("pull %+v", o.res[0])
	}
	// Once pinned, the lease is gone and the registered lock keeps the blob.
	if rep, err := fetch.GC(bg, fetch.GCInput{CAS: w.CAS, OlderThan: 0}); err != nil || rep.Leases != 0 || !w.CAS.Has(d) {
		t.Fatalf("gc after the pull = %+v, %v", rep, err)
	}
}

// waitLeased waits until a lease in the store names d.
func waitLeased(t *testing.T, s *cas.Store, d digest.Digest) bool {
	dir := filepath.Join(s.Root(), "leases")
	for deadline := time.Now().Add(slowdown.Scale(10 * time.Second)); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if b, err := os.ReadFile(filepath.Join(dir, e.Name())); err == nil && strings.Contains(string(b), d.String()+"\n") {
				return true
			}
		}
	}
	return false
}

// A pull in which everything failed trims nothing: the cache may be all this machine has while
// the stores are unreachable, and a failed pull brought nothing in to make room for (issue 22,
// item 17). A pull with one success among the failures still trims.
func TestPullThatAllFailedDoesNotTrim(t *testing.T) {
	w := newWorld(t)
	st := pulltest.LayoutStore(t)
	p := pulltest.Pack(t, "grep", "1.0.0", 211)
	pulltest.Push(t, st, grep, "1.0.0", "any", p)
	old := w.Ingest(pulltest.Pack(t, "old", "1.0.0", 212))
	at := time.Now().Add(-10 * time.Hour)
	os.Chtimes(w.CAS.Path(old), at, at)
	os.Chtimes(filepath.Join(w.CAS.Root(), "uses", old.Encoded()), at, at)
	var evicted []digest.Digest
	pl := w.puller(st)
	pl.SetTrim(1, func(ctx context.Context, d digest.Digest, dryRun bool) []string {
		evicted = append(evicted, d)
		return nil
	})
	pl.Pipeline().Report.Warn = func(string) {}
	if _, err := w.pull(pl, pulltest.Req(grep, "9.9.9")); err == nil {
		t.Fatal("a pull of a version no store has succeeded")
	}
	if !w.CAS.Has(old) || len(evicted) != 0 {
		t.Fatalf("a pull that all failed trimmed the cache: old blob kept %v, evicted %v", w.CAS.Has(old), evicted)
	}
	// The same cap, with one success among the failures: the trim runs.
	w.pull(pl, pulltest.Req(grep, "1.0.0"), pulltest.Req(ref.Name{Scope: "acme", Name: "nothere"}, "1.0.0"))
	if w.CAS.Has(old) {
		t.Fatal("a pull with a success did not trim to the cap")
	}
}
