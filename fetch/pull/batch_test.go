package pull_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
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

// While another process holds murmur.lock, a pull fetches, checks and commits every artifact,
// but writes no lock and does not end: the pins wait for the file lock. Once it is free, the
// pull's one write of the lock pins them all, each blob in the CAS.
func TestPullCommitsUnderTheLock(t *testing.T) {
	t.Parallel()
	w := pulltest.NewWorld(t)
	st := pulltest.LayoutStore(t)
	var reqs []pull.Request
	want := map[string]digest.Digest{}
	for i := range 5 {
		n := ref.Name{Scope: "acme", Name: fmt.Sprintf("batch%d", i)}
		p := pulltest.Pack(t, n.Name, "1.0.0", uint64(300+i))
		pulltest.Push(t, st, n, "1.0.0", "any", p)
		reqs = append(reqs, pulltest.Req(n, "1.0.0"))
		want[n.String()] = p.Digest()
	}
	unlock, err := lockedfile.Lock(context.Background(), lock.GuardPath(w.Proj.LockPath()))
	if err != nil {
		t.Fatal(err)
	}
	opened := &countingStore{Store: st}
	pl := w.Puller(opened)
	pl.Limits.Jobs = 2
	done := make(chan error, 1)
	go func() { _, err := w.Pull(pl, reqs...); done <- err }()
	// Every payload is fetched while the lock is held.
	watchdog := time.After(slowdown.Scale(30 * time.Second))
	for opened.opens.Load() < 5 || opened.opened.Load() > 0 {
		select {
		case <-watchdog:
			t.Fatalf("%d of 5 downloads done", opened.opens.Load())
		case <-time.After(time.Millisecond):
		}
	}
	if _, err := os.Stat(w.Proj.LockPath()); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the lock was written while another process held it: %v", err)
	}
	unlock()
	if err := deadline.Recv(t, done, "pull"); err != nil {
		t.Fatal(err)
	}
	l, err := lock.Read(w.Proj.LockPath())
	if err != nil {
		t.Fatal(err)
	}
	for n, d := range want {
		if e := l.Find(n); e == nil || e.SHA256.Any != d.Encoded() || !w.CAS.Has(d) {
			t.Errorf("%s: lock entry %+v, in the CAS: %v", n, e, w.CAS.Has(d))
		}
	}
}

// A request of the batch that fails the lock's check changes nothing, and the others of the same
// commit are pinned and in the CAS.
func TestPullBatchKeepsFailuresApart(t *testing.T) {
	t.Parallel()
	w := pulltest.NewWorld(t)
	st := pulltest.LayoutStore(t)
	a, b, c := ref.Name{Scope: "acme", Name: "one"}, ref.Name{Scope: "acme", Name: "two"}, ref.Name{Scope: "acme", Name: "three"}
	pa, pb, pc := pulltest.Pack(t, a.Name, "1.0.0", 1), pulltest.Pack(t, b.Name, "2.0.0", 2), pulltest.Pack(t, c.Name, "1.0.0", 3)
	pulltest.Push(t, st, a, "1.0.0", "any", pa)
	pulltest.Push(t, st, b, "2.0.0", "any", pb)
	pulltest.Push(t, st, c, "1.0.0", "any", pc)
	// The lock pins acme/two at another version: a plain pull of 2.0.0 is a lock conflict, found
	// only when the lock is updated (an Update request skips readPin's own check).
	if err := lock.Update(context.Background(), w.Proj.LockPath(), func(l *lock.Lock) error {
		return l.Upsert(b.String(), "1.0.0", "any", digest.FromString("old").Encoded(), "", false)
	}); err != nil {
		t.Fatal(err)
	}
	conflicting := pulltest.Req(b, "2.0.0")
	res, err := w.Pull(w.Puller(st), pulltest.Req(a, "1.0.0"), conflicting, pulltest.Req(c, "1.0.0"))
	errtest.WantToken(t, err, errs.LockConflict, "acme/two")
	if res[0].Error != "" || res[2].Error != "" || res[1].Error == "" {
		t.Fatalf("results %+v", res)
	}
	l, _ := lock.Read(w.Proj.LockPath())
	if e := l.Find(b.String()); e == nil || e.ResolvedVersion != "1.0.0" {
		t.Fatalf("the failed request changed its pin: %+v", e)
	}
	if w.CAS.Has(pb.Digest()) {
		t.Fatal("the failed request's blob is in the CAS")
	}
	for _, p := range []struct {
		n ref.Name
		d digest.Digest
	}{{a, pa.Digest()}, {c, pc.Digest()}} {
		if e := l.Find(p.n.String()); e == nil || e.SHA256.Any != p.d.Encoded() || !w.CAS.Has(p.d) {
			t.Errorf("%s was not committed with the batch: %+v", p.n, e)
		}
	}
}

// resolveBarrier answers the first Resolve (the store's health probe), and then none until n
// more are in flight at once.
type resolveBarrier struct {
	store.Store
	n       int32
	inside  atomic.Int32
	release chan struct{}
}

func (r *resolveBarrier) Resolve(ctx context.Context, n ref.Name, version, platform string) (store.Descriptor, error) {
	switch r.inside.Add(1) {
	case 1:
		return r.Store.Resolve(ctx, n, version, platform)
	case r.n + 1:
		close(r.release)
	}
	select {
	case <-r.release:
	case <-time.After(slowdown.Scale(30 * time.Second)):
		return store.Descriptor{}, errors.New("the other resolves never came: resolving is bounded by Jobs")
	}
	return r.Store.Resolve(ctx, n, version, platform)
}

// Every request of a pull resolves at once, whatever Jobs: Jobs bounds the downloads only.
func TestPullResolvesEveryRequestAtOnce(t *testing.T) {
	t.Parallel()
	w := pulltest.NewWorld(t)
	st := pulltest.LayoutStore(t)
	reqs := pulltest.PushMany(t, st, "meta", 6, 0, 400)
	pl := w.Puller(&resolveBarrier{Store: st, n: 5, release: make(chan struct{})})
	pl.Limits.Jobs = 1
	w.MustPull(pl, reqs...)
}
