package fetch_test

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

	fpull "github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
	"github.com/murmur-nexus/mur/internal/lockedfile"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/internal/slowdown"
	"github.com/murmur-nexus/mur/lock"
)

func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(slowdown.Scale(30 * time.Second)):
		t.Fatalf("no %s", what)
	}
	panic("unreachable")
}

// While another process holds murmur.lock, a pull fetches, checks and commits every artifact,
// but writes no lock and does not end: the pins wait for the file lock. Once it is free, the
// pull's one write of the lock pins them all, each blob in the CAS.
func TestPullCommitsUnderTheLock(t *testing.T) {
	w := newWorld(t)
	st := layoutStore(t)
	var reqs []fpull.Request
	want := map[string]digest.Digest{}
	for i := range 5 {
		n := ref.Name{Scope: "acme", Name: fmt.Sprintf("batch%d", i)}
		p := pack(t, n.Name, "1.0.0", uint64(300+i))
		push(t, st, n, "1.0.0", "any", p)
		reqs = append(reqs, req(n, "1.0.0"))
		want[n.String()] = p.digest()
	}
	unlock, err := lockedfile.Lock(context.Background(), lock.GuardPath(w.proj.LockPath()))
	if err != nil {
		t.Fatal(err)
	}
	opened := &countingStore{Store: st}
	pl := w.puller(opened)
	pl.Limits.Jobs = 2
	done := make(chan error, 1)
	go func() { _, err := w.pull(pl, reqs...); done <- err }()
	// Every payload is fetched while the lock is held.
	watchdog := time.After(slowdown.Scale(30 * time.Second))
	for opened.opens.Load() < 5 || opened.opened.Load() > 0 {
		select {
		case <-watchdog:
			t.Fatalf("%d of 5 downloads done", opened.opens.Load())
		case <-time.After(time.Millisecond):
		}
	}
	if _, err := os.Stat(w.proj.LockPath()); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the lock was written while another process held it: %v", err)
	}
	unlock()
	if err := within(t, done, "pull"); err != nil {
		t.Fatal(err)
	}
	l, err := lock.Read(w.proj.LockPath())
	if err != nil {
		t.Fatal(err)
	}
	for n, d := range want {
		if e := l.Find(n); e == nil || e.SHA256.Any != d.Encoded() || !w.cas.Has(d) {
			t.Errorf("%s: lock entry %+v, in the CAS: %v", n, e, w.cas.Has(d))
		}
	}
}

// A request of the batch that fails the lock's check changes nothing, and the others of the same
// commit are pinned and in the CAS.
func TestPullBatchKeepsFailuresApart(t *testing.T) {
	w := newWorld(t)
	st := layoutStore(t)
	a, b, c := ref.Name{Scope: "acme", Name: "one"}, ref.Name{Scope: "acme", Name: "two"}, ref.Name{Scope: "acme", Name: "three"}
	pa, pb, pc := pack(t, a.Name, "1.0.0", 1), pack(t, b.Name, "2.0.0", 2), pack(t, c.Name, "1.0.0", 3)
	push(t, st, a, "1.0.0", "any", pa)
	push(t, st, b, "2.0.0", "any", pb)
	push(t, st, c, "1.0.0", "any", pc)
	// The lock pins acme/two at another version: a plain pull of 2.0.0 is a lock conflict, found
	// only when the lock is updated (an Update request skips readPin's own check).
	if err := lock.Update(context.Background(), w.proj.LockPath(), func(l *lock.Lock) error {
		return l.Upsert(b.String(), "1.0.0", "any", digest.FromString("old").Encoded(), "", false)
	}); err != nil {
		t.Fatal(err)
	}
	conflicting := req(b, "2.0.0")
	res, err := w.pull(w.puller(st), req(a, "1.0.0"), conflicting, req(c, "1.0.0"))
	errtest.WantToken(t, err, errs.LockConflict, "acme/two")
	if res[0].Error != "" || res[2].Error != "" || res[1].Error == "" {
		t.Fatalf("results %+v", res)
	}
	l, _ := lock.Read(w.proj.LockPath())
	if e := l.Find(b.String()); e == nil || e.ResolvedVersion != "1.0.0" {
		t.Fatalf("the failed request changed its pin: %+v", e)
	}
	if w.cas.Has(pb.digest()) {
		t.Fatal("the failed request's blob is in the CAS")
	}
	for _, p := range []struct {
		n ref.Name
		d digest.Digest
	}{{a, pa.digest()}, {c, pc.digest()}} {
		if e := l.Find(p.n.String()); e == nil || e.SHA256.Any != p.d.Encoded() || !w.cas.Has(p.d) {
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
	w := newWorld(t)
	st := layoutStore(t)
	reqs := pushMany(t, st, "meta", 6, 0, 400)
	pl := w.puller(&resolveBarrier{Store: st, n: 5, release: make(chan struct{})})
	pl.Limits.Jobs = 1
	w.mustPull(pl, reqs...)
}
