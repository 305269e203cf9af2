package pull_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/fetch/internal/download"
	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/fetch/proxytest"
	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	fstore "github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
)

func parallelPuller(w *pulltest.World, st fstore.Store, conns, jobs int) *pull.Puller {
	pl := w.Puller(st)
	pl.Limits.Connections, pl.Limits.Jobs, pl.Limits.ParallelMin, pl.Limits.Chunk = conns, jobs, 256<<10, 64<<10
	piecesFirst(pl)
	return pl
}

// A large blob starts as one stream; one that proves slow is split, and the rest comes in pieces
// over several connections, continuing after what the stream wrote.
func TestParallelSplitsASlowStream(t *testing.T) {
	t.Parallel()
	reg := registrytest.Start(t)
	px := proxytest.Start(t, reg.Addr(), proxytest.Options{})
	st := pulltest.OpenStore(t, "oci://"+px.Addr()+"/murmur", ocistore.Options{})
	p := pulltest.PackSized(t, "grep", "1.0.0", 6<<20, 214)
	pulltest.Push(t, st, grep, "1.0.0", "any", p)
	px.Set(proxytest.Options{PathContains: "/blobs/", BytesPerSecond: 8 << 20})
	pushed := px.Requests(blobPath(p))
	w := pulltest.NewWorld(t)
	pl := w.Puller(st)
	pl.Limits.ParallelMin, pl.Limits.Chunk = 1<<20, 1<<20
	splitAt(pl, 1<<20)
	res := w.MustPull(pl, pulltest.Req(grep, "1.0.0"))[0]
	if res.Digest != p.Digest().String() || res.Connections < 2 {
		t.Fatalf("result %+v", res)
	}
	if n := px.Requests(blobPath(p)) - pushed; n < 3 || n > 7 {
		t.Errorf("%d blob requests, want the stream and a piece per MiB after it", n)
	}
	// The pieces continue after what the stream wrote: every byte is received once. (What the
	// proxy sent is no measure: the bytes in flight when the stream is cut depend on how soon
	// a loaded machine gets round to closing it.)
	if res.Transferred != int64(len(p.Zip)) || res.Resumed != 0 {
		t.Errorf("%d bytes received (%d resumed) for a %d-byte blob, want each byte once", res.Transferred, res.Resumed, len(p.Zip))
	}
}

// A fast stream is not split: one connection.
func TestParallelFastStreamStaysOne(t *testing.T) {
	t.Parallel()
	reg := registrytest.StartFaulty(t)
	st := pulltest.OpenStore(t, "oci://"+reg.Addr()+"/murmur", ocistore.Options{})
	p := pulltest.PackSized(t, "grep", "1.0.0", 2<<20, 215)
	pulltest.Push(t, st, grep, "1.0.0", "any", p)
	w := pulltest.NewWorld(t)
	pl := w.Puller(st)
	pl.Limits.ParallelMin, pl.Limits.Chunk = 1<<20, 256<<10
	// The engine asks the rule as the stream goes; the rule's own thresholds are
	// TestSlowLinkRule's. Judged on this machine's clock, a loaded CI core would make the
	// stream look slow.
	var asked atomic.Int64
	judgeFast(pl, &asked)
	res := w.MustPull(pl, pulltest.Req(grep, "1.0.0"))[0]
	if res.Digest != p.Digest().String() || res.Connections != 1 {
		t.Fatalf("result %+v", res)
	}
	if asked.Load() == 0 {
		t.Fatal("the stream was never judged: the split rule is not consulted while a large blob streams")
	}
}

// A large blob is fetched over several connections, each asking for pieces.
func TestParallelRanges(t *testing.T) {
	t.Parallel()
	reg := registrytest.Start(t)
	px := proxytest.Start(t, reg.Addr(), proxytest.Options{})
	st := pulltest.OpenStore(t, "oci://"+px.Addr()+"/murmur", ocistore.Options{})
	p := pulltest.PackSized(t, "grep", "1.0.0", 1<<20, 206)
	pulltest.Push(t, st, grep, "1.0.0", "any", p)
	// Slow enough that every connection gets to start.
	px.Set(proxytest.Options{PathContains: "/blobs/", BytesPerSecond: 8 << 20})
	pushed := px.Requests(blobPath(p))
	w := pulltest.NewWorld(t)
	res := w.MustPull(parallelPuller(w, st, 4, 4), pulltest.Req(grep, "1.0.0"))[0]
	pieces := (len(p.Zip) + 64<<10 - 1) / (64 << 10)
	if res.Digest != p.Digest().String() || res.Connections != 4 || res.Transferred != int64(len(p.Zip)) {
		t.Fatalf("result %+v", res)
	}
	if n := px.Requests(blobPath(p)) - pushed; n != pieces {
		t.Errorf("%d blob requests, want one per piece (%d)", n, pieces)
	}
	if served := px.BytesServed(blobPath(p)); served != int64(len(p.Zip)) {
		t.Errorf("%d bytes served for a %d-byte blob", served, len(p.Zip))
	}
}

// Each connection beyond a blob's first takes a job slot: --jobs bounds them all.
func TestParallelBoundedByJobs(t *testing.T) {
	t.Parallel()
	reg := registrytest.StartFaulty(t)
	st := pulltest.OpenStore(t, "oci://"+reg.Addr()+"/murmur", ocistore.Options{})
	p := pulltest.PackSized(t, "grep", "1.0.0", 1<<20, 207)
	pulltest.Push(t, st, grep, "1.0.0", "any", p)
	for _, c := range []struct{ conns, jobs, want int }{{4, 2, 2}, {4, 1, 1}, {1, 4, 1}, {3, 8, 3}} {
		w := pulltest.NewWorld(t)
		res := w.MustPull(parallelPuller(w, st, c.conns, c.jobs), pulltest.Req(grep, "1.0.0"))[0]
		if res.Digest != p.Digest().String() || res.Connections > c.want || (c.want > 1 && res.Connections < 2) {
			t.Errorf("--connections %d --jobs %d: %d connections, want at most %d", c.conns, c.jobs, res.Connections, c.want)
		}
	}
}

// A server that does not serve ranges gets one stream, from its answer to the first piece.
func TestParallelFallsBackToOneStream(t *testing.T) {
	t.Parallel()
	reg := registrytest.Start(t)
	px := proxytest.Start(t, reg.Addr(), proxytest.Options{IgnoreRange: true})
	st := pulltest.OpenStore(t, "oci://"+px.Addr()+"/murmur", ocistore.Options{})
	p := pulltest.PackSized(t, "grep", "1.0.0", 1<<20, 208)
	pulltest.Push(t, st, grep, "1.0.0", "any", p)
	pushed := px.Requests(blobPath(p))
	w := pulltest.NewWorld(t)
	res := w.MustPull(parallelPuller(w, st, 4, 4), pulltest.Req(grep, "1.0.0"))[0]
	if res.Digest != p.Digest().String() || res.Connections != 1 {
		t.Fatalf("result %+v", res)
	}
	if n := px.Requests(blobPath(p)) - pushed; n != 1 {
		t.Errorf("%d blob requests, want the first piece's answer read whole", n)
	}
}

// Pieces cut mid-way go back to the queue, and the blob completes.
func TestParallelCutPiecesComplete(t *testing.T) {
	t.Parallel()
	px, st, p := proxiedGrep(t, 1<<20, 209, ocistore.Options{})
	px.Set(proxytest.Options{PathContains: "/blobs/", Fault: proxytest.Cut, After: 20_000, Times: 3})
	w := pulltest.NewWorld(t)
	res := w.MustPull(parallelPuller(w, st, 4, 4), pulltest.Req(grep, "1.0.0"))[0]
	if res.Digest != p.Digest().String() {
		t.Fatalf("result %+v", res)
	}
	if served := px.BytesServed(blobPath(p)); served > int64(len(p.Zip))+3*64<<10 {
		t.Errorf("%d bytes served for a %d-byte blob", served, len(p.Zip))
	}
}

// A parallel download that fails keeps every piece it holds, and the next pull asks only for
// the others.
func TestParallelFailureKeepsPieces(t *testing.T) {
	t.Parallel()
	px, st, p := proxiedGrep(t, 1<<20, 210, ocistore.Options{Retries: -1})
	w := pulltest.NewWorld(t)
	before := w.State()
	// Once bytes arrive, every new request is hung up on: the pull fails with pieces held.
	px.Set(proxytest.Options{PathContains: "/blobs/", BytesPerSecond: 4 << 20})
	var n atomic.Int64
	pl := parallelPuller(w, st, 2, 2)
	pl.Report.Events = func(ev pull.Event) {
		if ev.Phase == pull.PhaseFetch && n.Add(1) == 1 {
			px.Set(proxytest.Options{PathContains: "/blobs/", Fault: proxytest.Hangup})
		}
	}
	_, err := w.Pull(pl, pulltest.Req(grep, "1.0.0"))
	if errs.TokenOf(err) != errs.Network || !strings.Contains(err.Error(), "kept") {
		t.Fatalf("pull: %v", err)
	}
	w.AssertKept(before)
	served := px.BytesServed(blobPath(p))
	if served == 0 || served >= int64(len(p.Zip)) {
		t.Fatalf("%d bytes served before the failure", served)
	}
	px.Set(proxytest.Options{})
	res := w.MustPull(parallelPuller(w, st, 2, 2), pulltest.Req(grep, "1.0.0"))[0]
	total := px.BytesServed(blobPath(p))
	if res.Digest != p.Digest().String() || !hasNote(res, "continued") || total > int64(len(p.Zip))+2*64<<10 {
		t.Fatalf("result %+v; %d bytes served in all for a %d-byte blob", res, total, len(p.Zip))
	}
}

// Parallel too: a kept download whose ETag changed is started over, whether the server honours
// If-Range (the probe gets the whole blob) or ignores it (the probe's 206 carries the new ETag).
func TestParallelETagChangedStartsOver(t *testing.T) {
	t.Parallel()
	for _, ignoreIf := range []bool{false, true} {
		w, st, p := rangeWorld(t, 1<<20, `"new"`)
		st.srv.ignoreIf = ignoreIf
		keep(w, p, 300_000, st.String(), `"old"`)
		res := w.MustPull(parallelPuller(w, st, 4, 4), pulltest.Req(grep, "1.0.0"))[0]
		if res.Digest != p.Digest().String() || res.Resumed != 0 || !hasNote(res, `ETag changed from "old" to "new"`) {
			t.Fatalf("ignoreIf %v: result %+v", ignoreIf, res)
		}
	}
}

// A server whose ETag changes in the middle of a parallel download: the pieces that come back
// with the new one are not spliced on, and the blob is fetched again as one stream.
func TestParallelETagChangesMidway(t *testing.T) {
	t.Parallel()
	w, st, p := rangeWorld(t, 1<<20, `"v1"`)
	st.srv.ignoreIf = true
	st.srv.flipAfter = 3
	res := w.MustPull(parallelPuller(w, st, 2, 2), pulltest.Req(grep, "1.0.0"))[0]
	if res.Digest != p.Digest().String() || !hasNote(res, "stopped serving byte ranges") {
		t.Fatalf("result %+v", res)
	}
}

func TestSlowLinkRule(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		n       int64
		elapsed time.Duration
		slow    bool
	}{
		{16 << 20, time.Second, true},            // a capped connection
		{200 << 20, time.Second, false},          // loopback, a LAN
		{1 << 10, 100 * time.Millisecond, false}, // too early to tell
		{40 << 20, 250 * time.Millisecond, false},
		{20 << 20, 250 * time.Millisecond, true},
	} {
		if got := download.SlowLink(c.n, c.elapsed); got != c.slow {
			t.Errorf("%d bytes in %s: slow %v, want %v", c.n, c.elapsed, got, c.slow)
		}
	}
}
