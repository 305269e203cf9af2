package github

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"

	"github.com/murmur-nexus/mur/fetch/github/githubtest"
	"github.com/murmur-nexus/mur/fetch/internal/download"
	"github.com/murmur-nexus/mur/internal/errs"
)

// hostileStorage stands in front of the fake's storage and changes its answers with alter.
func hostileStorage(t *testing.T, fake *githubtest.Server, alter func(*http.Response) error) {
	t.Helper()
	up, err := url.Parse(fake.StorageURL())
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(up)
	rp.ModifyResponse = alter
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	fake.AdvertiseVia(githubtest.Storage, srv.URL)
}

// Storage whose 206 names a Content-Range one byte off the range asked for (same length) is not
// taken as the piece: the answer does not fit (issue 22, item 16).
func TestAssetRangerRefusesAWrongContentRange(t *testing.T) {
	fake, c := setup(t)
	a := grepAsset(t, c)
	hostileStorage(t, fake, func(resp *http.Response) error {
		var s, e, n int64
		if _, err := fmt.Sscanf(resp.Header.Get("Content-Range"), "bytes %d-%d/%d", &s, &e, &n); err == nil {
			resp.Header.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", s+1, e+1, n))
		}
		return nil
	})
	p, err := c.AssetRanger(owner, repo, a, false).Open(context.Background(), 10, 19, "")
	if err == nil {
		p.Body.Close()
	}
	if !errors.Is(err, download.ErrNoRanges) || errs.TokenOf(err) != errs.Network {
		t.Fatalf("a 206 with Content-Range one byte off: %+v, %v; want it refused as not fitting", p, err)
	}
}

// Storage whose body ends cleanly (no error, chunked, no length) before the range asked for is
// read as a break the fill continues after, not as the piece (issue 22, item 16).
func TestAssetRangerContinuesAShortBody(t *testing.T) {
	fake, c := setup(t)
	a := grepAsset(t, c)
	hostileStorage(t, fake, func(resp *http.Response) error {
		if resp.StatusCode == http.StatusPartialContent || resp.StatusCode == http.StatusOK {
			resp.Body = struct {
				io.Reader
				io.Closer
			}{io.LimitReader(resp.Body, 5), resp.Body}
			resp.Header.Del("Content-Length")
			resp.ContentLength = -1
		}
		return nil
	})
	for _, rng := range [][2]int64{{10, 19}, {0, -1}} {
		p, err := c.AssetRanger(owner, repo, a, false).Open(context.Background(), rng[0], rng[1], "")
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(p.Body)
		p.Body.Close()
		if len(b) != 5 || !download.Resumable(context.Background(), err) {
			t.Fatalf("bytes %d-%d ended after %d bytes with %v; want a break the fill continues after", rng[0], rng[1], len(b), err)
		}
	}
}
