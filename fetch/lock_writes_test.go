package fetch_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch"
	fpull "github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/internal/slowdown"
	"github.com/murmur-nexus/mur/lock"
)

// A pull writes murmur.lock once, however many artifacts it pins and however many group commits
// that takes: a pull of 300 made 34 writes when each commit wrote its own, every one a re-read
// and a rewrite of a lock that grew with the pull. Through the project verb too, whose last
// transition declares and prunes.
func TestPullWritesTheLockOnce(t *testing.T) {
	const n = 300
	st := layoutStore(t)
	reqs := pushMany(t, st, "once", n, 0, 9000)
	t.Run("pull", func(t *testing.T) {
		w := newWorld(t)
		pl := w.puller(st)
		writes := fetch.CountLockWrites(pl)
		w.mustPull(pl, reqs...)
		if got := writes.Load(); got > 2 {
			t.Errorf("a pull of %d artifacts wrote murmur.lock %d times; want at most 2", n, got)
		}
		assertPinned(t, w, reqs)
	})
	t.Run("project", func(t *testing.T) {
		w := newWorld(t)
		in := declaring(t, w, reqs)
		pl := w.puller(st)
		writes := fetch.CountLockWrites(pl)
		if _, err := pl.PullProject(context.Background(), w.proj, in, declaredReqs(in), fetch.SyncOptions{}); err != nil {
			t.Fatal(err)
		}
		if got := writes.Load(); got > 2 {
			t.Errorf("mur pull of a project of %d artifacts wrote murmur.lock %d times; want at most 2", n, got)
		}
		assertPinned(t, w, reqs)
	})
}

// declaring writes the murmur.yaml of w's project that declares reqs.
func declaring(t *testing.T, w *world, reqs []fpull.Request) fetch.Intent {
	t.Helper()
	var yaml strings.Builder
	yaml.WriteString("name: many\nartifacts:\n")
	for _, r := range reqs {
		fmt.Fprintf(&yaml, "  - name: %s\n    version: %s\n", r.Name, r.Version)
	}
	return intentOf(t, w, yaml.String())
}

func assertPinned(t *testing.T, w *world, reqs []fpull.Request) {
	t.Helper()
	l := w.readLock()
	for _, r := range reqs {
		e := l.Find(r.Name.String())
		if e == nil {
			t.Errorf("%s is not pinned", r.Name)
			continue
		}
		if !w.cas.Has(digest.NewDigestFromEncoded(digest.SHA256, e.SHA256.Any)) {
			t.Errorf("%s is pinned to a blob the CAS lacks", r.Name)
		}
	}
}

// stuckStore holds every download of the artifacts it names until release is closed, whatever
// the context says: a download that takes its time to wind down after Ctrl-C.
type stuckStore struct {
	store.Store
	stuck   map[string]bool
	entered chan string
	release chan struct{}
}

func (s *stuckStore) Open(ctx context.Context, n ref.Name, d digest.Digest) (io.ReadCloser, error) {
	if s.stuck[n.String()] {
		s.entered <- n.String()
		<-s.release
		return nil, errs.New(errs.Network, "%s: interrupted", n)
	}
	return s.Store.Open(ctx, n, d)
}

// Ctrl-C pins what committed at once: the artifacts that finished are in murmur.lock before the
// ones still in flight have wound down (they hold on here until the lock has them), and the
// ones in flight change nothing.
func TestInterruptedPullPinsWhatCommittedAtOnce(t *testing.T) {
	st := layoutStore(t)
	done := pushMany(t, st, "done", 6, 0, 9500)
	held := pushMany(t, st, "held", 2, 0, 9600)
	stuck := &stuckStore{Store: st, stuck: map[string]bool{}, entered: make(chan string, len(held)), release: make(chan struct{})}
	for _, r := range held {
		stuck.stuck[r.Name.String()] = true
	}
	w := newWorld(t)
	pl := w.puller(stuck)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	finished := make(chan struct{}, len(done))
	pl.Report.Events = func(ev fpull.Event) {
		if ev.Phase == fpull.PhaseDone {
			finished <- struct{}{}
		}
	}
	pulled := make(chan error, 1)
	go func() {
		_, err := pl.Pull(ctx, w.proj, append(append([]fpull.Request(nil), done...), held...))
		pulled <- err
	}()
	for range held {
		within(t, stuck.entered, "a held download")
	}
	for range done {
		within(t, finished, "a finished artifact")
	}
	cancel()
	// Polling the file, nothing timed: the held downloads wait until the lock has the pins.
	watchdog := time.After(slowdown.Scale(30 * time.Second))
	for !pinsAll(w, done) {
		select {
		case <-watchdog:
			t.Fatalf("the interrupted pull did not pin what had finished while the rest wound down:\n%s", lockText(w))
		case <-time.After(time.Millisecond):
		}
	}
	close(stuck.release)
	if err := within(t, pulled, "the pull's end"); err == nil {
		t.Fatal("the interrupted pull reported no error")
	}
	l := w.readLock()
	for _, r := range held {
		if l.Find(r.Name.String()) != nil {
			t.Errorf("%s, still in flight at the interrupt, is pinned", r.Name)
		}
	}
	assertPinned(t, w, done)
}

func pinsAll(w *world, reqs []fpull.Request) bool {
	l, err := lock.Read(w.proj.LockPath())
	if err != nil {
		return false
	}
	for _, r := range reqs {
		if l.Find(r.Name.String()) == nil {
			return false
		}
	}
	return true
}

func lockText(w *world) string {
	b, err := os.ReadFile(w.proj.LockPath())
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// A pull in which one artifact fails pins every other one, in its one write of the lock, and
// leaves nothing of the failed one.
func TestFailingPullPinsTheOthers(t *testing.T) {
	st := layoutStore(t)
	good := pushMany(t, st, "good", 20, 0, 9700)
	bad := ref.Name{Scope: "acme", Name: "bad"}
	p := pack(t, bad.Name, "1.0.0", 9800)
	push(t, st, bad, "1.0.0", "any", p)
	w := newWorld(t)
	pl := w.puller(&corruptOne{Store: st, name: bad})
	writes := fetch.CountLockWrites(pl)
	res, err := w.pull(pl, append(append([]fpull.Request(nil), good...), req(bad, "1.0.0"))...)
	errtest.WantToken(t, err, errs.Integrity, "acme/bad")
	if res[len(res)-1].Error == "" {
		t.Fatalf("the corrupt artifact reported no error: %+v", res[len(res)-1])
	}
	if got := writes.Load(); got != 1 {
		t.Errorf("murmur.lock written %d times; want once", got)
	}
	assertPinned(t, w, good)
	if w.readLock().Find(bad.String()) != nil || w.cas.Has(p.digest()) {
		t.Error("the failed artifact left a pin or a blob")
	}
}

// corruptOne serves name's payload with its last byte changed.
type corruptOne struct {
	store.Store
	name ref.Name
}

func (c *corruptOne) Open(ctx context.Context, n ref.Name, d digest.Digest) (io.ReadCloser, error) {
	rc, err := c.Store.Open(ctx, n, d)
	if err != nil || n != c.name {
		return rc, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return nil, err
	}
	b[len(b)-1] ^= 0xff
	return io.NopCloser(strings.NewReader(string(b))), nil
}

// Another process pins an artifact of this pull at other bytes after the pull committed it and
// before the pull wrote the lock: the lock keeps the other process's pins (that one, and one of
// its own), the pull's pin of that artifact fails with lock-conflict, and the pull's other pins
// are written beside them.
func TestLateConflictFailsAloneAndLosesNothing(t *testing.T) {
	st := layoutStore(t)
	reqs := pushMany(t, st, "late", 4, 0, 9900)
	victim := reqs[0].Name.String()
	theirs := digest.FromString("another process pinned other bytes").Encoded()
	w := newWorld(t)
	pl := w.puller(st)
	var once sync.Once
	pl.Report.Events = func(ev fpull.Event) {
		if ev.Phase == fpull.PhaseDone && ev.Name == victim {
			once.Do(func() {
				err := lock.Update(context.Background(), w.proj.LockPath(), func(l *lock.Lock) error {
					if err := l.Upsert(victim, "1.0.0", "any", theirs, "", false); err != nil {
						return err
					}
					return l.Upsert("acme/theirs", "2.0.0", "any", theirs, "", false)
				})
				if err != nil {
					t.Error(err)
				}
			})
		}
	}
	res, err := w.pull(pl, reqs...)
	errtest.WantToken(t, err, errs.LockConflict, victim)
	if res[0].Err == nil {
		t.Fatalf("the conflicting artifact succeeded: %+v", res[0])
	}
	l := w.readLock()
	if e := l.Find(victim); e == nil || e.SHA256.Any != theirs {
		t.Errorf("the other process's pin of %s was lost: %+v", victim, e)
	}
	if l.Find("acme/theirs") == nil {
		t.Error("the other process's own pin was lost")
	}
	assertPinned(t, w, reqs[1:])
}

// When the one write of the lock fails (murmur.yaml was broken mid-pull, so the transition, which
// re-reads it under the file lock, refuses), every artifact the pull committed fails with the
// reason, and the lock is not written: their blobs stay in the CAS for the next pull.
func TestFailedLockWriteFailsThePins(t *testing.T) {
	st := layoutStore(t)
	reqs := pushMany(t, st, "broken", 3, 0, 9950)
	w := newWorld(t)
	in := declaring(t, w, reqs)
	pl := w.puller(st)
	var once sync.Once
	pl.Report.Events = func(ev fpull.Event) {
		if ev.Phase == fpull.PhaseDone {
			once.Do(func() {
				if err := os.WriteFile(in.Path, []byte("name: [broken\n"), 0o644); err != nil {
					t.Error(err)
				}
			})
		}
	}
	rep, err := pl.PullProject(context.Background(), w.proj, in, declaredReqs(in), fetch.SyncOptions{})
	if err == nil {
		t.Fatal("the pull succeeded though murmur.lock could not be written")
	}
	for _, r := range rep.Results {
		if r.Err == nil || !strings.Contains(r.Error, "is in the cache, but murmur.lock could not pin it") {
			t.Errorf("%s: error %q; want the failed write of the lock", r.Name, r.Error)
		}
		if !w.cas.Has(digest.Digest(r.Digest)) {
			t.Errorf("%s: its blob is not in the CAS", r.Name)
		}
	}
	if _, err := os.Stat(w.proj.LockPath()); err == nil {
		t.Errorf("murmur.lock was written:\n%s", lockText(w))
	}
}
