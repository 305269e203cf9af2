package pull_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/fetch/stage"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
)

func pl2(w *pulltest.World, st store.Store) *pull.Puller {
	p := w.Puller(st)
	p.Limits.Jobs = 4
	return p
}

// countingStore tracks how many resolves, and how many downloads (from Open until the payload's
// reader is closed), are inside the store at once.
type countingStore struct {
	store.Store
	resolving, opened       atomic.Int64
	maxResolving, maxOpened atomic.Int64
	opens                   atomic.Int64 // Opens that returned a reader
}

func enter(active, max *atomic.Int64) {
	n := active.Add(1)
	for {
		m := max.Load()
		if n <= m || max.CompareAndSwap(m, n) {
			return
		}
	}
}

func (c *countingStore) Resolve(ctx context.Context, n ref.Name, version, platform string) (store.Descriptor, error) {
	enter(&c.resolving, &c.maxResolving)
	defer c.resolving.Add(-1)
	return c.Store.Resolve(ctx, n, version, platform)
}

func (c *countingStore) Open(ctx context.Context, n ref.Name, d digest.Digest) (io.ReadCloser, error) {
	enter(&c.opened, &c.maxOpened)
	rc, err := c.Store.Open(ctx, n, d)
	if err != nil {
		c.opened.Add(-1)
		return nil, err
	}
	c.opens.Add(1)
	return &closeHook{ReadCloser: rc, done: func() { c.opened.Add(-1) }}, nil
}

type closeHook struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (h *closeHook) Close() error {
	h.once.Do(h.done)
	return h.ReadCloser.Close()
}

func TestPullJobs(t *testing.T) {
	t.Parallel()
	w := pulltest.NewWorld(t)
	st := pulltest.LayoutStore(t)
	var reqs []pull.Request
	want := map[string]digest.Digest{}
	// Requested in reverse name order, so that request order differs from the lock's order.
	for i := 9; i >= 0; i-- {
		n := ref.Name{Scope: "acme", Name: fmt.Sprintf("tool%d", i)}
		p := pulltest.Pack(t, n.Name, "1.0.0", uint64(100+i))
		pulltest.Push(t, st, n, "1.0.0", "any", p)
		reqs = append(reqs, pulltest.Req(n, "1.0.0"))
		want[n.String()] = p.Digest()
	}
	counted := &countingStore{Store: st}
	pl := w.Puller(counted)
	pl.Limits.Jobs, pl.Limits.MetaJobs = 1, 3
	var mu sync.Mutex
	var events []pull.Event
	pl.Report.Events = func(ev pull.Event) { mu.Lock(); events = append(events, ev); mu.Unlock() }
	res := w.MustPull(pl, reqs...)
	if len(res) != len(reqs) {
		t.Fatalf("%d results for %d requests", len(res), len(reqs))
	}
	for i, r := range res {
		if r.Name != reqs[i].Name.String() || r.Digest != want[r.Name].String() {
			t.Errorf("result %d is %s %s, want %s %s", i, r.Name, r.Digest, reqs[i].Name, want[reqs[i].Name.String()])
		}
	}
	l, err := lock.Read(w.Proj.LockPath())
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Artifacts) != 10 {
		t.Fatalf("the lock holds %d artifacts, want 10", len(l.Artifacts))
	}
	for n, d := range want {
		if e := l.Find(n); e == nil || e.SHA256.Any != d.Encoded() {
			t.Errorf("lock entry of %s: %+v", n, e)
		}
		if !w.CAS.Has(d) {
			t.Errorf("blob of %s missing", n)
		}
	}
	if m := counted.maxResolving.Load(); m > 3 || m < 1 {
		t.Errorf("%d resolves were in flight at once with MetaJobs 3", m)
	}
	done := 0
	for _, ev := range events {
		if ev.Phase == "done" {
			done++
		}
	}
	if done != 10 {
		t.Errorf("%d done events, want 10", done)
	}

	// One missing among several: the others complete, the missing one changes nothing of its own.
	w2 := pulltest.NewWorld(t)
	missing := ref.Name{Scope: "acme", Name: "missing"}
	res, err = w2.Pull(pl2(w2, st), pulltest.Req(missing, "1.0.0"), reqs[0], reqs[1])
	errtest.WantToken(t, err, errs.NotFound, "acme/missing@1.0.0")
	if res[0].Error == "" || res[1].Error != "" || res[2].Error != "" {
		t.Fatalf("results %+v", res)
	}
	l2, _ := lock.Read(w2.Proj.LockPath())
	if len(l2.Artifacts) != 2 || l2.Find("acme/missing") != nil {
		t.Fatalf("lock after a partial failure: %+v", l2.Artifacts)
	}
	if _, err := os.Stat(stage.StagedDir(w2.Proj.Tools(), missing)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("tools/acme/missing exists after a failed pull")
	}
}
