package pull_test

import (
	"context"
	"fmt"
	"hash"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/internal/download"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/internal/slowdown"
	"github.com/murmur-nexus/mur/internal/slowdown/deadline"
)

// openGate counts a store's blob downloads in flight (from Open to the body's Close) and lets
// none go before every one it waits for has opened.
type openGate struct {
	store.Store // a bare Store: the wrapper serves no ranges, so every download is an Open
	mu          sync.Mutex
	inside, max int
	wait        int // Opens held until this many are in flight at once
	reached     bool
	all         chan struct{} // closed when they are
	opened      chan struct{} // one send per Open
}

func newOpenGate(st store.Store, wait int) *openGate {
	return &openGate{Store: st, wait: wait, all: make(chan struct{}), opened: make(chan struct{}, 64)}
}

func (g *openGate) Open(ctx context.Context, n ref.Name, d digest.Digest) (io.ReadCloser, error) {
	g.mu.Lock()
	g.inside++
	g.max = max(g.max, g.inside)
	if g.inside == g.wait && !g.reached {
		g.reached = true
		close(g.all)
	}
	g.mu.Unlock()
	g.opened <- struct{}{}
	if g.wait > 0 {
		select {
		case <-g.all:
		case <-time.After(slowdown.Scale(30 * time.Second)):
			g.mu.Lock()
			seen := g.max
			g.mu.Unlock()
			g.done()
			return nil, fmt.Errorf("only %d of %d downloads were in flight at once", seen, g.wait)
		}
	}
	rc, err := g.Store.Open(ctx, n, d)
	if err != nil {
		g.done()
		return nil, err
	}
	return &openGateBody{ReadCloser: rc, done: g.done}, nil
}

func (g *openGate) done() {
	g.mu.Lock()
	g.inside--
	g.mu.Unlock()
}

type openGateBody struct {
	io.ReadCloser
	done func()
	once sync.Once
}

func (b *openGateBody) Close() error {
	b.once.Do(b.done)
	return b.ReadCloser.Close()
}

// --jobs bounds bytes in flight, not requests: six small artifacts download at once under
// --jobs 1, each a round trip of its own rather than one after another.
func TestPullDownloadsSmallArtifactsTogether(t *testing.T) {
	t.Parallel()
	w := pulltest.NewWorld(t)
	st := pulltest.LayoutStore(t)
	reqs := pulltest.PushMany(t, st, "small", 6, 0, 600)
	g := newOpenGate(st, len(reqs))
	pl := w.Puller(g)
	pl.Limits.Jobs = 1
	w.MustPull(pl, reqs...)
	if g.max != len(reqs) {
		t.Fatalf("%d downloads in flight at most, want all %d", g.max, len(reqs))
	}
}

// A slot holds eight small downloads at most (each takes at least 1 MiB of its 8): under --jobs 1,
// twelve small artifacts go eight at a time. The gate holds the first eight until all eight are
// in, which a bound that let more through would show as a ninth beside them.
func TestPullDownloadsAtMostASlotOfSmallOnes(t *testing.T) {
	t.Parallel()
	w := pulltest.NewWorld(t)
	st := pulltest.LayoutStore(t)
	reqs := pulltest.PushMany(t, st, "tiny", 12, 0, 650)
	perSlot := int(download.SlotBytes / (1 << 20))
	g := newOpenGate(st, perSlot)
	pl := w.Puller(g)
	pl.Limits.Jobs = 1
	w.MustPull(pl, reqs...)
	if g.max != perSlot {
		t.Fatalf("%d small downloads in flight at most under --jobs 1, want %d", g.max, perSlot)
	}
}

// A payload downloaded and not yet followed (inflated and checked) still holds its share of
// --jobs: a pull whose downloads outrun its CPU keeps at most a slot's worth of them in memory,
// however many artifacts it has. With the streams held (the compiled cache's key, which each
// stream feeds the payload as it follows it, takes no byte until released), eight small
// downloads fill the one slot and no ninth starts.
func TestPullHoldsASlotUntilThePayloadIsFollowed(t *testing.T) {
	// Not parallel: its held streams keep the process's inflate slots from other pulls.
	w := pulltest.NewWorld(t)
	st := pulltest.LayoutStore(t)
	reqs := pulltest.PushMany(t, st, "held", 12, 0, 660)
	g := newOpenGate(st, 0)
	pl := w.Puller(g)
	pl.Limits.Jobs = 1
	hold := make(chan struct{})
	release := sync.OnceFunc(func() { close(hold) })
	defer release()
	pl.Compile.Precompile = func(context.Context, []byte) error { return nil }
	pl.Compile.Cache = &heldCompiled{hold: hold}
	done := make(chan error, 1)
	go func() { _, err := w.Pull(pl, reqs...); done <- err }()
	perSlot := int(download.SlotBytes / (1 << 20))
	for range perSlot {
		deadline.Recv(t, g.opened, "download of a slot's share")
	}
	select {
	case <-g.opened:
		t.Errorf("a download started while %d payloads waited to be followed under --jobs 1", perSlot)
	case <-time.After(slowdown.Scale(300 * time.Millisecond)):
	}
	release()
	if err := deadline.Recv(t, done, "end of the pull"); err != nil {
		t.Fatal(err)
	}
}

// heldCompiled is a compiled cache whose key hashes take no byte until hold is closed: a payload
// stream, which feeds the key as it follows the download, waits there.
type heldCompiled struct {
	fakeCompiled
	hold chan struct{}
}

func (c *heldCompiled) ModuleKey() hash.Hash { return heldHash{c.fakeCompiled.ModuleKey(), c.hold} }

type heldHash struct {
	hash.Hash
	hold chan struct{}
}

func (h heldHash) Write(p []byte) (int, error) {
	<-h.hold
	return h.Hash.Write(p)
}

// A blob of a slot's worth or more takes a whole slot: under --jobs 1, two of them download one
// after the other.
func TestPullDownloadsLargeArtifactsJobsAtATime(t *testing.T) {
	t.Parallel()
	w := pulltest.NewWorld(t)
	st := pulltest.LayoutStore(t)
	reqs := pulltest.PushMany(t, st, "large", 2, download.SlotBytes+1, 700)
	g := newOpenGate(st, 0)
	// The first download holds its slot until the second had every chance to open beside it:
	// a bound that let it would be seen here (a bound that holds can only be waited out).
	first := make(chan struct{})
	go func() {
		<-g.opened
		select {
		case <-g.opened:
		case <-time.After(slowdown.Scale(300 * time.Millisecond)):
		}
		close(first)
	}()
	pl := w.Puller(&holdFirst{openGate: g, first: first})
	pl.Limits.Jobs = 1
	w.MustPull(pl, reqs...)
	if g.max != 1 {
		t.Fatalf("%d large downloads in flight at once under --jobs 1, want 1", g.max)
	}
}

// holdFirst keeps the first download's body from ending until first is closed.
type holdFirst struct {
	*openGate
	first chan struct{}
	once  sync.Once
}

func (h *holdFirst) Open(ctx context.Context, n ref.Name, d digest.Digest) (io.ReadCloser, error) {
	rc, err := h.openGate.Open(ctx, n, d)
	if err != nil {
		return nil, err
	}
	held := false
	h.once.Do(func() { held = true })
	if !held {
		return rc, nil
	}
	return &heldBody{ReadCloser: rc, until: h.first}, nil
}

type heldBody struct {
	io.ReadCloser
	until chan struct{}
}

func (b *heldBody) Read(p []byte) (int, error) {
	<-b.until
	return b.ReadCloser.Read(p)
}
