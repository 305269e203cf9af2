package pull_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/fetch/internal/download"
	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/fetch/proxytest"
	"github.com/murmur-nexus/mur/fetch/pull"
	fpull "github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/fetch/stage"
	fstore "github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/artifact"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/internal/slowdown"
)

// keep leaves in w's CAS what a pull of p killed after n bytes would have left.
func keep(w *pulltest.World, p pulltest.Packed, n int, store, validator string) {
	w.T.Helper()
	iw, err := w.CAS.OpenResumable(context.Background(), cas.ResumeInfo{Digest: p.Digest(), Size: int64(len(p.Zip)), Store: store})
	if err != nil {
		w.T.Fatal(err)
	}
	if _, err := iw.Write(p.Zip[:n]); err != nil {
		w.T.Fatal(err)
	}
	if err := iw.SetValidator(validator); err != nil {
		w.T.Fatal(err)
	}
	iw.Keep()
	if err := iw.Close(); err != nil {
		w.T.Fatal(err)
	}
}

func blobPath(p pulltest.Packed) string { return "/v2/murmur/acme/grep/blobs/" + p.Digest().String() }

func hasNote(res fpull.Result, part string) bool {
	for _, n := range res.Notes {
		if strings.Contains(n, part) {
			return true
		}
	}
	return false
}

func lastRecord(w *pulltest.World) cas.Record {
	w.T.Helper()
	rs := w.Records()
	if len(rs) == 0 {
		w.T.Fatal("no pull record")
	}
	return rs[len(rs)-1]
}

// A download a killed pull kept is continued with a Range request, and only the rest is served.
func TestRangedContinuesAKeptDownload(t *testing.T) {
	t.Parallel()
	reg := registrytest.Start(t)
	px := proxytest.Start(t, reg.Addr(), proxytest.Options{})
	st := pulltest.OpenStore(t, "oci://"+px.Addr()+"/murmur", ocistore.Options{})
	p := pulltest.PackSized(t, "grep", "1.0.0", 1<<20, 201)
	pulltest.Push(t, st, grep, "1.0.0", "any", p)
	w := pulltest.NewWorld(t)
	kept := len(p.Zip) * 2 / 5
	keep(w, p, kept, st.String(), "")
	before := px.BytesServed(blobPath(p))

	res := w.MustPull(w.Puller(st), pulltest.Req(grep, "1.0.0"))[0]
	if res.Digest != p.Digest().String() || res.Resumed != int64(kept) || res.Transferred != int64(len(p.Zip)-kept) {
		t.Fatalf("result %+v, want resumed at %d", res, kept)
	}
	if served := px.BytesServed(blobPath(p)) - before; served != int64(len(p.Zip)-kept) {
		t.Errorf("the registry served %d bytes of the blob, want the %d kept bytes spared", served, len(p.Zip)-kept)
	}
	if !hasNote(res, "continued a download") {
		t.Errorf("notes %q", res.Notes)
	}
	if rec := lastRecord(w); len(rec.Notes) == 0 || rec.Transferred != int64(len(p.Zip)-kept) {
		t.Errorf("record %+v", rec)
	}
	if s := w.State(); s.Kept != 0 || s.Ingest != 0 {
		t.Errorf("cas/ingest after the pull: %+v", s)
	}
}

// A body that breaks off mid-transfer is continued within the same pull.
func TestRangedBrokenBodyContinues(t *testing.T) {
	t.Parallel()
	reg := registrytest.StartFaulty(t)
	px := proxytest.Start(t, reg.Addr(), proxytest.Options{})
	st := pulltest.OpenStore(t, "oci://"+px.Addr()+"/murmur", ocistore.Options{})
	p := pulltest.PackSized(t, "grep", "1.0.0", 1<<20, 202)
	pulltest.Push(t, st, grep, "1.0.0", "any", p)
	px.Set(proxytest.Options{PathContains: "/blobs/", Fault: proxytest.Cut, After: 300_000, Times: 2})
	pushed := px.Requests(blobPath(p)) // the push asked whether the blob was there
	w := pulltest.NewWorld(t)
	res := w.MustPull(w.Puller(st), pulltest.Req(grep, "1.0.0"))[0]
	if res.Digest != p.Digest().String() {
		t.Fatalf("result %+v", res)
	}
	if n := px.Requests(blobPath(p)) - pushed; n != 3 {
		t.Errorf("%d blob requests, want the first and a continuation after each of 2 cuts: %v", n, px.Served())
	}
	if served := px.BytesServed(blobPath(p)); served > int64(len(p.Zip))+64<<10 {
		t.Errorf("the registry served %d bytes for a %d-byte blob", served, len(p.Zip))
	}
}

// A server that ignores Range makes the pull start over, and says so in the records.
func TestRangedServerIgnoringRangeStartsOver(t *testing.T) {
	t.Parallel()
	reg := registrytest.Start(t)
	px := proxytest.Start(t, reg.Addr(), proxytest.Options{})
	st := pulltest.OpenStore(t, "oci://"+px.Addr()+"/murmur", ocistore.Options{})
	p := pulltest.PackSized(t, "grep", "1.0.0", 1<<20, 203)
	pulltest.Push(t, st, grep, "1.0.0", "any", p)
	w := pulltest.NewWorld(t)
	keep(w, p, len(p.Zip)/2, st.String(), "")
	px.Set(proxytest.Options{IgnoreRange: true})
	res := w.MustPull(w.Puller(st), pulltest.Req(grep, "1.0.0"))[0]
	if res.Digest != p.Digest().String() || res.Resumed != 0 || res.Transferred != int64(len(p.Zip)) {
		t.Fatalf("result %+v", res)
	}
	if !hasNote(res, "ignores Range") || !hasNote(res, "started over") {
		t.Errorf("notes %q", res.Notes)
	}
	if rec := lastRecord(w); !strings.Contains(strings.Join(rec.Notes, "\n"), "ignores Range") {
		t.Errorf("record notes %q", rec.Notes)
	}
}

// A kept download whose bytes were damaged since is started over, not blamed on the store.
func TestRangedDamagedKeptBytesStartOver(t *testing.T) {
	t.Parallel()
	reg := registrytest.StartFaulty(t)
	st := pulltest.OpenStore(t, "oci://"+reg.Addr()+"/murmur", ocistore.Options{})
	p := pulltest.PackSized(t, "grep", "1.0.0", 200_000, 204)
	pulltest.Push(t, st, grep, "1.0.0", "any", p)
	w := pulltest.NewWorld(t)
	damaged := pulltest.Packed{Zip: bytes.Clone(p.Zip)}
	damaged.Zip[10] ^= 0xff
	iw, _ := w.CAS.OpenResumable(context.Background(), cas.ResumeInfo{Digest: p.Digest(), Size: int64(len(p.Zip)), Store: st.String()})
	iw.Write(damaged.Zip[:100_000])
	iw.Keep()
	iw.Close()
	res := w.MustPull(w.Puller(st), pulltest.Req(grep, "1.0.0"))[0]
	if res.Digest != p.Digest().String() || !hasNote(res, "did not hash") {
		t.Fatalf("result %+v", res)
	}
}

// rangeServer serves one blob as http.ServeContent does, with an ETag, and can be made to
// misbehave the ways servers do.
type rangeServer struct {
	mu         sync.Mutex
	data       []byte
	etag       string
	ignoreIf   bool  // answer ranges whatever If-Range says, with the current ETag
	shiftRange bool  // answer with a Content-Range one byte off
	flipAfter  int64 // after this many requests the ETag becomes `"flipped"`; 0: never
	requests   atomic.Int64
	srv        *httptest.Server
}

func newRangeServer(t *testing.T, data []byte, etag string) *rangeServer {
	rs := &rangeServer{data: data, etag: etag}
	rs.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := rs.requests.Add(1)
		rs.mu.Lock()
		data, etag, ignoreIf, shift := rs.data, rs.etag, rs.ignoreIf, rs.shiftRange
		if rs.flipAfter > 0 && n > rs.flipAfter {
			etag = `"flipped"`
		}
		rs.mu.Unlock()
		w.Header().Set("ETag", etag)
		if ignoreIf {
			r.Header.Del("If-Range")
		}
		if shift && r.Header.Get("Range") != "" {
			var a, b int64
			fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-%d", &a, &b)
			w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", a+1, b, len(data)))
			w.WriteHeader(http.StatusPartialContent)
			w.Write(data[a+1 : b+1])
			return
		}
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
	}))
	t.Cleanup(rs.srv.Close)
	return rs
}

// rangeStore is a store whose blobs come from a rangeServer: the Ranger of a real registry,
// minus the registry.
type rangeStore struct {
	fstore.Store
	srv *rangeServer
}

func (s rangeStore) Ranger(ctx context.Context, n ref.Name, d digest.Digest, size int64) (download.Ranger, error) {
	return rangerFunc(func(ctx context.Context, off, end int64, validator string) (download.Part, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.srv.srv.URL, nil)
		download.Header(req.Header, off, end, validator)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return download.Part{}, errs.Wrap(err, errs.Network, "%v", err)
		}
		if part, handled, err := download.Answer(resp, off, end, size, "the test blob", nil); handled {
			return part, err
		}
		resp.Body.Close()
		return download.Part{}, errs.New(errs.Network, "HTTP %d", resp.StatusCode)
	}), nil
}

// rangedStore is what the pull asks of a store that serves ranges.
type rangedStore interface {
	fstore.Store
	Ranger(ctx context.Context, n ref.Name, d digest.Digest, size int64) (download.Ranger, error)
}

type rangerFunc func(ctx context.Context, off, end int64, validator string) (download.Part, error)

func (f rangerFunc) Open(ctx context.Context, off, end int64, validator string) (download.Part, error) {
	return f(ctx, off, end, validator)
}

func rangeWorld(t *testing.T, size int, etag string) (*pulltest.World, rangeStore, pulltest.Packed) {
	layout := pulltest.LayoutStore(t)
	p := pulltest.PackSized(t, "grep", "1.0.0", size, 205)
	pulltest.Push(t, layout, grep, "1.0.0", "any", p)
	return pulltest.NewWorld(t), rangeStore{Store: layout, srv: newRangeServer(t, p.Zip, etag)}, p
}

// If-Range with the ETag the kept bytes came with: a server whose content changed answers with
// the whole blob, and the pull starts over.
func TestRangedETagChangedStartsOver(t *testing.T) {
	t.Parallel()
	w, st, p := rangeWorld(t, 300_000, `"new"`)
	keep(w, p, 100_000, st.String(), `"old"`)
	res := w.MustPull(w.Puller(st), pulltest.Req(grep, "1.0.0"))[0]
	if res.Digest != p.Digest().String() || res.Transferred != int64(len(p.Zip)) || !hasNote(res, `ETag changed from "old" to "new"`) {
		t.Fatalf("result %+v", res)
	}
}

// The same with a server that ignores If-Range: its 206 with another ETag is not spliced on.
func TestRangedIgnoredIfRangeStartsOver(t *testing.T) {
	t.Parallel()
	w, st, p := rangeWorld(t, 300_000, `"new"`)
	st.srv.ignoreIf = true
	keep(w, p, 100_000, st.String(), `"old"`)
	res := w.MustPull(w.Puller(st), pulltest.Req(grep, "1.0.0"))[0]
	if res.Digest != p.Digest().String() || !hasNote(res, `ETag changed from "old" to "new"`) {
		t.Fatalf("result %+v", res)
	}
}

// A matching ETag continues.
func TestRangedSameETagContinues(t *testing.T) {
	t.Parallel()
	w, st, p := rangeWorld(t, 300_000, `"same"`)
	keep(w, p, 100_000, st.String(), `"same"`)
	res := w.MustPull(w.Puller(st), pulltest.Req(grep, "1.0.0"))[0]
	if res.Digest != p.Digest().String() || res.Resumed != 100_000 || res.Transferred != int64(len(p.Zip)-100_000) {
		t.Fatalf("result %+v", res)
	}
}

// A 206 whose Content-Range is not the range asked for is never written: the pull starts over
// with a request for the whole blob.
func TestRangedWrongContentRangeStartsOver(t *testing.T) {
	t.Parallel()
	w, st, p := rangeWorld(t, 300_000, `"e"`)
	st.srv.shiftRange = true
	keep(w, p, 100_000, st.String(), "")
	res := w.MustPull(w.Puller(st), pulltest.Req(grep, "1.0.0"))[0]
	if res.Digest != p.Digest().String() || res.Resumed != 0 || !hasNote(res, "does not fit") {
		t.Fatalf("result %+v", res)
	}
}

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
	reg := registrytest.StartFaulty(t)
	px := proxytest.Start(t, reg.Addr(), proxytest.Options{})
	st := pulltest.OpenStore(t, "oci://"+px.Addr()+"/murmur", ocistore.Options{})
	p := pulltest.PackSized(t, "grep", "1.0.0", 1<<20, 209)
	pulltest.Push(t, st, grep, "1.0.0", "any", p)
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
	reg := registrytest.StartFaulty(t)
	px := proxytest.Start(t, reg.Addr(), proxytest.Options{})
	st := pulltest.OpenStore(t, "oci://"+px.Addr()+"/murmur", ocistore.Options{Retries: -1})
	p := pulltest.PackSized(t, "grep", "1.0.0", 1<<20, 210)
	pulltest.Push(t, st, grep, "1.0.0", "any", p)
	w := pulltest.NewWorld(t)
	before := w.State()
	// Once bytes arrive, every new request is hung up on: the pull fails with pieces held.
	px.Set(proxytest.Options{PathContains: "/blobs/", BytesPerSecond: 4 << 20})
	var n atomic.Int64
	pl := parallelPuller(w, st, 2, 2)
	pl.Report.Events = func(ev fpull.Event) {
		if ev.Phase == fpull.PhaseFetch && n.Add(1) == 1 {
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

// Ctrl-C keeps the bytes too.
func TestRangedInterruptKeeps(t *testing.T) {
	t.Parallel()
	reg := registrytest.StartFaulty(t)
	px := proxytest.Start(t, reg.Addr(), proxytest.Options{})
	st := pulltest.OpenStore(t, "oci://"+px.Addr()+"/murmur", ocistore.Options{})
	p := pulltest.PackSized(t, "grep", "1.0.0", 3<<20, 211)
	pulltest.Push(t, st, grep, "1.0.0", "any", p)
	px.Set(proxytest.Options{PathContains: "/blobs/", BytesPerSecond: 2 << 20})
	w := pulltest.NewWorld(t)
	ctx, cancel := context.WithCancel(context.Background())
	pl := w.Puller(st)
	var once sync.Once
	pl.Report.Events = func(ev fpull.Event) {
		// Ctrl-C once some bytes are in, however slowly the machine got there.
		if ev.Phase == fpull.PhaseFetch && ev.Bytes >= 256<<10 {
			once.Do(cancel)
		}
	}
	if _, err := pl.Pull(ctx, w.Proj, []fpull.Request{pulltest.Req(grep, "1.0.0")}); err == nil {
		t.Fatal("an interrupted pull succeeded")
	}
	if s := w.State(); s.Kept != 1 {
		t.Fatalf("state after Ctrl-C: %+v", s)
	}
	px.Set(proxytest.Options{})
	res := w.MustPull(w.Puller(st), pulltest.Req(grep, "1.0.0"))[0]
	if res.Resumed == 0 || res.Digest != p.Digest().String() {
		t.Fatalf("result %+v", res)
	}
}

// Wrong bytes are never kept: the next pull starts from nothing.
func TestRangedWrongBytesNotKept(t *testing.T) {
	t.Parallel()
	reg := registrytest.StartFaulty(t)
	st := pulltest.OpenStore(t, "oci://"+reg.Addr()+"/murmur", ocistore.Options{})
	p := pulltest.PackSized(t, "grep", "1.0.0", 200_000, 212)
	pulltest.Push(t, st, grep, "1.0.0", "any", p)
	w := pulltest.NewWorld(t)
	before := w.State()
	wrong := bytes.Clone(p.Zip)
	wrong[len(wrong)/2] ^= 1
	reg.Arm(registrytest.BlobBody(len(wrong), wrong))
	_, err := w.Pull(w.Puller(st), pulltest.Req(grep, "1.0.0"))
	if errs.TokenOf(err) != errs.Integrity {
		t.Fatalf("pull: %v", err)
	}
	w.AssertUnchanged(before)
	names, _ := os.ReadDir(filepath.Join(w.CAS.Root(), "ingest"))
	if len(names) != 0 {
		t.Fatalf("ingest holds %d files", len(names))
	}
}

// A partial read of a kept download's record says what it holds, for anyone who looks.
func TestRangedKeptRecordNamesItsStore(t *testing.T) {
	t.Parallel()
	reg := registrytest.StartFaulty(t)
	st := pulltest.OpenStore(t, "oci://"+reg.Addr()+"/murmur", ocistore.Options{Timeout: slowdown.Scale(300 * time.Millisecond), Retries: -1})
	p := pulltest.PackSized(t, "grep", "1.0.0", 200_000, 213)
	pulltest.Push(t, st, grep, "1.0.0", "any", p)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	reg.Arm(registrytest.StallBlob(len(p.Zip), p.Zip[:50_000], release, nil))
	w := pulltest.NewWorld(t)
	_, err := w.Pull(w.Puller(st), pulltest.Req(grep, "1.0.0"))
	if errs.TokenOf(err) != errs.Network {
		t.Fatalf("pull: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(w.CAS.Root(), "ingest", "resume-"+p.Digest().Encoded()+".json"))
	if err != nil || !strings.Contains(string(b), st.String()) || !strings.Contains(string(b), p.Digest().String()) {
		t.Fatalf("record %s (%v)", b, err)
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

// gatedStore is a registry whose first blob answer stops at pauseAt bytes, waits for release and
// then breaks off, as a connection that drops does.
type gatedStore struct {
	rangedStore
	pauseAt int64
	paused  chan struct{}
	release chan struct{}
	once    sync.Once
}

func (g *gatedStore) Ranger(ctx context.Context, n ref.Name, d digest.Digest, size int64) (download.Ranger, error) {
	r, err := g.rangedStore.Ranger(ctx, n, d, size)
	if err != nil {
		return nil, err
	}
	return rangerFunc(func(ctx context.Context, off, end int64, validator string) (download.Part, error) {
		p, err := r.Open(ctx, off, end, validator)
		if err == nil {
			g.once.Do(func() { p.Body = &gatedBody{ReadCloser: p.Body, g: g, left: g.pauseAt - off} })
		}
		return p, err
	}), nil
}

type gatedBody struct {
	io.ReadCloser
	g    *gatedStore
	left int64
}

func (b *gatedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		close(b.g.paused)
		<-b.g.release
		return 0, errs.Wrap(io.ErrUnexpectedEOF, errs.Network, "the connection dropped")
	}
	n, err := b.ReadCloser.Read(p[:min(int64(len(p)), b.left)])
	b.left -= int64(n)
	return n, err
}

// A registry's download feeds single-pass staging too, across a break it continues after: the
// bytes still arrive in order from the blob's first one.
func TestRangedStagesWhileDownloading(t *testing.T) {
	t.Parallel()
	reg := registrytest.StartFaulty(t)
	st := pulltest.OpenStore(t, "oci://"+reg.Addr()+"/murmur", ocistore.Options{})
	wasm := artifacttest.Module(2<<20, 216)
	spec := artifacttest.Spec{Name: "grep", Version: "1.0.0", Wasm: wasm}
	p := pulltest.Packed{Zip: spec.Zip(), Wasm: wasm, YAML: spec.Manifest()}
	pulltest.Push(t, st, grep, "1.0.0", "any", p)
	a, err := artifact.Read(bytes.NewReader(p.Zip), int64(len(p.Zip)))
	if err != nil {
		t.Fatal(err)
	}
	off, _, csize, _ := a.PayloadEntry()
	g := &gatedStore{rangedStore: st.(rangedStore), pauseAt: off + csize, paused: make(chan struct{}), release: make(chan struct{})}
	w := pulltest.NewWorld(t)
	done := make(chan []fpull.Result, 1)
	go func() {
		res, err := w.Pull(w.Puller(g), pulltest.Req(grep, "1.0.0"))
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	release := sync.OnceFunc(func() { close(g.release) })
	defer release()
	pulltest.Within(t, g.paused, "pause after the payload's last byte")
	assertStagedUnseen(t, w, wasm)
	release()
	res := pulltest.Within(t, done, "end of the pull")
	if len(res) != 1 || res[0].Digest != p.Digest().String() || res[0].Transferred != int64(len(p.Zip)) {
		t.Fatalf("result %+v", res)
	}
	if err := stage.CheckStaged(w.Proj.Tools(), grep, p.Digest()); err != nil {
		t.Fatal(err)
	}
}
