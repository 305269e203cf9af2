package pull_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/fetch/github"
	"github.com/murmur-nexus/mur/fetch/github/githubtest"
	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/slowdown"
)

// How a hostile server answers a request for a byte range of a blob.
const (
	offByOne  = "off-by-one" // a 206 whose Content-Range starts one byte later than asked
	starTotal = "star-total" // a 206 whose Content-Range gives the total as `/*`
	refuse416 = "416"        // a 416, as for a range past the end
	every416  = "every-416"  // a 416 for every request of the blob, ranged or not
)

// hostileRanges is a reverse proxy to upstream that answers the blob requests whose path contains
// match the way mode says, and counts them.
type hostileRanges struct {
	srv      *httptest.Server
	requests atomic.Int64
}

func startHostileRanges(t *testing.T, upstream, match, mode string) *hostileRanges {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	h := &hostileRanges{}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ModifyResponse = func(resp *http.Response) error {
		if !strings.Contains(resp.Request.URL.Path, match) || resp.Request.Method != http.MethodGet {
			return nil
		}
		if resp.StatusCode/100 == 3 {
			return nil // a redirect to where the blob is: not the blob yet
		}
		if h.requests.Add(1) > 100*maxHostileRequests {
			return nil // a pull that loops ends here, and its test fails on the count
		}
		ranged := resp.Request.Header.Get("Range") != ""
		switch {
		case mode == every416 || (mode == refuse416 && ranged):
			resp.Body.Close()
			resp.StatusCode, resp.Status = http.StatusRequestedRangeNotSatisfiable, "416 Requested Range Not Satisfiable"
			resp.Body = http.NoBody
			resp.ContentLength = 0
			resp.Header.Del("Content-Length")
		case resp.StatusCode == http.StatusPartialContent:
			var a, b, total int64
			fmt.Sscanf(resp.Header.Get("Content-Range"), "bytes %d-%d/%d", &a, &b, &total)
			if mode == offByOne {
				resp.Header.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", a+1, b+1, total))
			} else {
				resp.Header.Set("Content-Range", fmt.Sprintf("bytes %d-%d/*", a, b))
			}
		}
		return nil
	}
	h.srv = httptest.NewServer(rp)
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hostileRanges) addr() string { return strings.TrimPrefix(h.srv.URL, "http://") }

// hostileRangePuller takes a blob of 1 MiB as large: it is fetched in ranges, as a blob of
// 64 MiB or more is by default.
func hostileRangePuller(w *pulltest.World, st store.Store) *pull.Puller {
	pl := w.Puller(st)
	pl.Limits.Connections, pl.Limits.ParallelMin, pl.Limits.Chunk = 4, 256<<10, 64<<10
	return pl
}

// maxHostileRequests bounds what a pull of one blob may ask a server whose every range answer is
// wrong: the ranged attempt, one stream, and one retry of the source's own.
const maxHostileRequests = 4

// A registry whose Range answers don't fit (a Content-Range off by one or with a `/*` total, a
// 416) ends the ranged attempt at once: the blob comes as one stream, after a bounded number of
// requests. One that refuses the stream too fails the pull with integrity, naming the store.
func TestRangedHostileRegistryIsBounded(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{offByOne, starTotal, refuse416, every416} {
		t.Run(mode, func(t *testing.T) {
			reg := registrytest.Start(t)
			direct := pulltest.OpenStore(t, "oci://"+reg.Addr()+"/murmur", ocistore.Options{})
			p := pulltest.PackSized(t, "grep", "1.0.0", 1<<20, 230)
			pulltest.Push(t, direct, grep, "1.0.0", "any", p)
			h := startHostileRanges(t, "http://"+reg.Addr(), blobPath(p), mode)
			st := pulltest.OpenStore(t, "oci://"+h.addr()+"/murmur", ocistore.Options{})
			w := pulltest.NewWorld(t)
			before := w.State()
			res, err := w.Pull(hostileRangePuller(w, st), pulltest.Req(grep, "1.0.0"))
			n := h.requests.Load()
			t.Logf("%d requests, error %v", n, err)
			if n >= maxHostileRequests {
				t.Fatalf("%d blob requests, want fewer than %d", n, maxHostileRequests)
			}
			if mode != every416 {
				if err != nil || res[0].Digest != p.Digest().String() || !hasNote(res[0], "as one stream") {
					t.Fatalf("result %+v, error %v; want the blob as one stream", res, err)
				}
				return
			}
			if errs.TokenOf(err) != errs.Integrity || !strings.Contains(err.Error(), st.String()) {
				t.Fatalf("error %v, want integrity naming %s", err, st)
			}
			w.AssertUnchanged(before)
		})
	}
}

// The same for a GitHub release asset, whose storage host answers ranges wrongly.
func TestSourceHostileRangesAreBounded(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{offByOne, starTotal, refuse416, every416} {
		t.Run(mode, func(t *testing.T) {
			fake := githubtest.New(t)
			fake.AddRepo("acme", "murmur-artifacts", 1, 2)
			p := pulltest.PackSized(t, "grep", "1.0.0", 1<<20, 231)
			fake.Publish("acme", "murmur-artifacts", "acme", githubtest.Artifact{Name: "acme/grep", Version: "1.0.0", Release: "v1.0.0", Asset: "grep-1.0.0.mur.zip", Data: p.Zip})
			h := startHostileRanges(t, fake.StorageURL(), objectPath(fake), mode)
			fake.AdvertiseVia(githubtest.Storage, h.srv.URL)
			w := pulltest.NewWorld(t)
			pl := w.Puller()
			pl.Limits.Connections, pl.Limits.ParallelMin, pl.Limits.Chunk = 4, 256<<10, 64<<10
			pl.Source = github.NewSource(github.NewClient(github.ClientOptions{BaseURL: fake.APIURL(), Token: "t0ken", Retries: 1, Timeout: slowdown.Scale(2 * time.Second)}), nil)
			before := w.State()
			res, err := w.Pull(pl, pulltest.Req(grep, "1.0.0"))
			n := h.requests.Load()
			t.Logf("%d requests, error %v", n, err)
			if n >= maxHostileRequests {
				t.Fatalf("%d asset requests, want fewer than %d", n, maxHostileRequests)
			}
			if mode != every416 {
				if err != nil || res[0].Digest != p.Digest().String() || !hasNote(res[0], "as one stream") {
					t.Fatalf("result %+v, error %v; want the asset as one stream", res, err)
				}
				return
			}
			if errs.TokenOf(err) != errs.Integrity || !strings.Contains(err.Error(), "github") {
				t.Fatalf("error %v, want integrity naming the release", err)
			}
			w.AssertUnchanged(before)
		})
	}
}
