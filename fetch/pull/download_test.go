package pull_test

import (
	"bytes"
	"context"
	"fmt"
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
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	fstore "github.com/murmur-nexus/mur/fetch/store"
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

func hasNote(res pull.Result, part string) bool {
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
	px, st, p := proxiedGrep(t, 1<<20, 202, ocistore.Options{})
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

// Ctrl-C keeps the bytes too.
func TestRangedInterruptKeeps(t *testing.T) {
	t.Parallel()
	px, st, p := proxiedGrep(t, 3<<20, 211, ocistore.Options{})
	px.Set(proxytest.Options{PathContains: "/blobs/", BytesPerSecond: 2 << 20})
	w := pulltest.NewWorld(t)
	ctx, cancel := context.WithCancel(context.Background())
	pl := w.Puller(st)
	var once sync.Once
	pl.Report.Events = func(ev pull.Event) {
		// Ctrl-C once some bytes are in, however slowly the machine got there.
		if ev.Phase == pull.PhaseFetch && ev.Bytes >= 256<<10 {
			once.Do(cancel)
		}
	}
	if _, err := pl.Pull(ctx, w.Proj, []pull.Request{pulltest.Req(grep, "1.0.0")}); err == nil {
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
