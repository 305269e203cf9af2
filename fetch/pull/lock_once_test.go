package pull_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
	"github.com/murmur-nexus/mur/internal/lockedfile"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/internal/slowdown"
	"github.com/murmur-nexus/mur/internal/slowdown/deadline"
	"github.com/murmur-nexus/mur/lock"
)

// The pipeline writes murmur.lock once per pull (ledger.go): what its commits pinned is written
// when it ends, at once when it is interrupted, and beside what other processes wrote meanwhile.

// countWrites makes p's lock writer count its calls.
func countWrites(p *pull.Puller) *atomic.Int64 {
	var n atomic.Int64
	inner := p.Lock
	p.Lock = func(ctx context.Context, proj pull.Project, fn func(*lock.Lock) error) error {
		n.Add(1)
		return inner(ctx, proj, fn)
	}
	return &n
}

// assertPinned fails unless murmur.lock pins every one of reqs to a blob the CAS holds.
func assertPinned(t *testing.T, w *pulltest.World, reqs []pull.Request) {
	t.Helper()
	l := w.ReadLock()
	for _, r := range reqs {
		e := l.Find(r.Name.String())
		if e == nil {
			t.Errorf("%s is not pinned", r.Name)
			continue
		}
		if !w.CAS.Has(digest.NewDigestFromEncoded(digest.SHA256, e.SHA256.Any)) {
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
	t.Parallel()
	st := pulltest.LayoutStore(t)
	done := pulltest.PushMany(t, st, "done", 6, 0, 9500)
	held := pulltest.PushMany(t, st, "held", 2, 0, 9600)
	stuck := &stuckStore{Store: st, stuck: map[string]bool{}, entered: make(chan string, len(held)), release: make(chan struct{})}
	for _, r := range held {
		stuck.stuck[r.Name.String()] = true
	}
	w := pulltest.NewWorld(t)
	pl := w.Puller(stuck)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	finished := make(chan struct{}, len(done))
	pl.Report.Events = func(ev pull.Event) {
		if ev.Phase == pull.PhaseDone {
			finished <- struct{}{}
		}
	}
	pulled := make(chan error, 1)
	go func() {
		_, err := pl.Pull(ctx, w.Proj, append(append([]pull.Request(nil), done...), held...))
		pulled <- err
	}()
	for range held {
		deadline.Recv(t, stuck.entered, "a held download")
	}
	for range done {
		deadline.Recv(t, finished, "a finished artifact")
	}
	cancel()
	// Polling the file, nothing timed: the held downloads wait until the lock has the pins.
	watchdog := time.After(slowdown.Scale(30 * time.Second))
	for !pinsAll(w, done) {
		select {
		case <-watchdog:
			b, _ := os.ReadFile(w.Proj.LockPath())
			t.Fatalf("the interrupted pull did not pin what had finished while the rest wound down:\n%s", b)
		case <-time.After(time.Millisecond):
		}
	}
	close(stuck.release)
	if err := deadline.Recv(t, pulled, "the pull's end"); err == nil {
		t.Fatal("the interrupted pull reported no error")
	}
	l := w.ReadLock()
	for _, r := range held {
		if l.Find(r.Name.String()) != nil {
			t.Errorf("%s, still in flight at the interrupt, is pinned", r.Name)
		}
	}
	assertPinned(t, w, done)
}

func pinsAll(w *pulltest.World, reqs []pull.Request) bool {
	l, err := lock.Read(w.Proj.LockPath())
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

// A pull in which one artifact fails pins every other one, in its one write of the lock, and
// leaves nothing of the failed one.
func TestFailingPullPinsTheOthers(t *testing.T) {
	t.Parallel()
	st := pulltest.LayoutStore(t)
	good := pulltest.PushMany(t, st, "good", 20, 0, 9700)
	bad := ref.Name{Scope: "acme", Name: "bad"}
	p := pulltest.Pack(t, bad.Name, "1.0.0", 9800)
	pulltest.Push(t, st, bad, "1.0.0", "any", p)
	w := pulltest.NewWorld(t)
	pl := w.Puller(&corruptOne{Store: st, name: bad})
	writes := countWrites(pl)
	res, err := w.Pull(pl, append(append([]pull.Request(nil), good...), pulltest.Req(bad, "1.0.0"))...)
	errtest.WantToken(t, err, errs.Integrity, "acme/bad")
	if res[len(res)-1].Error == "" {
		t.Fatalf("the corrupt artifact reported no error: %+v", res[len(res)-1])
	}
	if got := writes.Load(); got != 1 {
		t.Errorf("murmur.lock written %d times; want once", got)
	}
	assertPinned(t, w, good)
	if w.ReadLock().Find(bad.String()) != nil || w.CAS.Has(p.Digest()) {
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
	return io.NopCloser(bytes.NewReader(b)), nil
}

// Another process pins an artifact of this pull at other bytes after the pull committed it and
// before the pull wrote the lock: the lock keeps the other process's pins (that one, and one of
// its own), the pull's pin of that artifact fails with lock-conflict, and the pull's other pins
// are written beside them.
func TestLateConflictFailsAloneAndLosesNothing(t *testing.T) {
	t.Parallel()
	st := pulltest.LayoutStore(t)
	reqs := pulltest.PushMany(t, st, "late", 4, 0, 9900)
	victim := reqs[0].Name.String()
	theirs := digest.FromString("another process pinned other bytes").Encoded()
	w := pulltest.NewWorld(t)
	pl := w.Puller(st)
	var once sync.Once
	pl.Report.Events = func(ev pull.Event) {
		if ev.Phase == pull.PhaseDone && ev.Name == victim {
			once.Do(func() {
				err := lock.Update(context.Background(), w.Proj.LockPath(), func(l *lock.Lock) error {
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
	res, err := w.Pull(pl, reqs...)
	errtest.WantToken(t, err, errs.LockConflict, victim)
	if res[0].Err == nil {
		t.Fatalf("the conflicting artifact succeeded: %+v", res[0])
	}
	l := w.ReadLock()
	if e := l.Find(victim); e == nil || e.SHA256.Any != theirs {
		t.Errorf("the other process's pin of %s was lost: %+v", victim, e)
	}
	if l.Find("acme/theirs") == nil {
		t.Error("the other process's own pin was lost")
	}
	assertPinned(t, w, reqs[1:])
}

// WaitForPins, what mur waits for before it exits after Ctrl-C, holds while an interrupted pull
// has pins to write: here another process holds murmur.lock, so the write waits, and so does
// WaitForPins, until that process lets go; then the pins are in the lock. Not parallel: the
// pins it waits for are the whole process's.
func TestWaitForPinsHoldsUntilTheInterruptWrite(t *testing.T) {
	st := pulltest.LayoutStore(t)
	done := pulltest.PushMany(t, st, "owed", 2, 0, 9970)
	held := pulltest.PushMany(t, st, "stuck", 1, 0, 9980)
	stuck := &stuckStore{Store: st, stuck: map[string]bool{held[0].Name.String(): true}, entered: make(chan string, 1), release: make(chan struct{})}
	w := pulltest.NewWorld(t)
	unlock, err := lockedfile.Lock(context.Background(), lock.GuardPath(w.Proj.LockPath()))
	if err != nil {
		t.Fatal(err)
	}
	pl := w.Puller(stuck)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	finished := make(chan struct{}, len(done))
	pl.Report.Events = func(ev pull.Event) {
		if ev.Phase == pull.PhaseDone {
			finished <- struct{}{}
		}
	}
	pulled := make(chan error, 1)
	go func() {
		_, err := pl.Pull(ctx, w.Proj, append(append([]pull.Request(nil), done...), held...))
		pulled <- err
	}()
	deadline.Recv(t, stuck.entered, "the held download")
	for range done {
		deadline.Recv(t, finished, "a finished artifact")
	}
	cancel()
	give, stopWaiting := context.WithCancel(context.Background())
	waited := make(chan bool, 1)
	go func() { waited <- pull.WaitForPins(give) }()
	stopWaiting()
	if deadline.Recv(t, waited, "WaitForPins, given up") {
		t.Fatal("WaitForPins reported every pin written while the lock's write still waited for the file lock")
	}
	unlock()
	if !pull.WaitForPins(deadline.Context(t)) {
		t.Fatal("WaitForPins still waited once the lock was free")
	}
	assertPinned(t, w, done)
	close(stuck.release)
	deadline.Recv(t, pulled, "the pull's end")
}
