package pull_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/fetch/provenance/sigstore"
	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/internal/ref"
)

// A cold pull of 20 artifacts that looks for provenance (prefer, a verifier) on a registry
// without the referrers API (docker-registry answers 404): each artifact's look-up asks its
// sha256-<hex> fallback tag (beside the API while the registry's answer there is unknown), with
// the subject manifest
// the resolve already read (no second read of the version's tag). And the look-ups run beside the
// downloads, not after them: the registry holds back every blob until every artifact's fallback
// tag was asked, which a pull that looked up bundles after each download could never satisfy.
func TestPullOf20LooksUpReferrersBesideTheBlobs(t *testing.T) {
	t.Parallel()
	const waitAsked = time.Minute
	reg := registrytest.Start(t)
	const n = 20
	var mu sync.Mutex
	counts := map[string]int{}
	fallbacks := map[string]bool{}
	allAsked, gaveUp := make(chan struct{}), make(chan struct{})
	var giveUp sync.Once
	u, _ := url.Parse("http://" + reg.Addr())
	rp := httputil.NewSingleHostReverseProxy(u)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		kind := "other"
		switch {
		case p == "/v2/" || p == "/v2":
			kind = "ping"
		case strings.Contains(p, "/referrers/"):
			kind = "referrers"
		case strings.Contains(p, "/manifests/sha256-"):
			kind = "fallback"
		case strings.Contains(p, "/manifests/"):
			kind = "manifest"
		case strings.Contains(p, "/blobs/"):
			kind = "blob"
		case strings.HasSuffix(p, "/tags/list"):
			kind = "tags"
		}
		mu.Lock()
		counts[kind]++
		if kind == "fallback" {
			fallbacks[p] = true
			if len(fallbacks) == n {
				close(allAsked)
			}
		}
		mu.Unlock()
		if kind == "blob" {
			select {
			case <-allAsked:
			case <-gaveUp:
			case <-time.After(waitAsked):
				// Not a timing condition: without look-ups beside the downloads this never comes.
				t.Errorf("a blob waited %v for the bundle look-ups: they do not run beside the downloads", waitAsked)
				giveUp.Do(func() { close(gaveUp) })
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	addr := "oci://" + strings.TrimPrefix(front.URL, "http://") + "/murmur"
	pusher := pulltest.OpenStore(t, "oci://"+reg.Addr()+"/murmur", ocistore.Options{})
	var reqs []pull.Request
	for i := range n {
		name := ref.Name{Scope: "acme", Name: fmt.Sprintf("tool%02d", i)}
		pulltest.Push(t, pusher, name, "1.0.0", "any", pulltest.Pack(t, name.Name, "1.0.0", uint64(700+i)))
		reqs = append(reqs, pulltest.Req(name, "1.0.0"))
	}
	w := pulltest.NewWorld(t)
	pl := w.Puller(pulltest.OpenStore(t, addr, ocistore.Options{Pool: ocistore.NewPool()}))
	pl.Provenance.Verifier = &sigstore.Local{}
	// One job slot holds 8 small downloads: the other 12 wait for room, and their look-ups,
	// which otherwise wait for the blob's request to go out, must not wait with them.
	pl.Limits.Jobs = 1
	res := w.MustPull(pl, reqs...)
	for _, r := range res {
		if len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "no provenance bundle") {
			t.Errorf("%s: warnings %q; want the one no-provenance warning", r.Name, r.Warnings)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	want := map[string]int{"ping": 1, "manifest": n, "fallback": n, "blob": n}
	for k, v := range want {
		if counts[k] != v {
			t.Errorf("%d %s requests; want %d (all: %v)", counts[k], k, v, counts)
		}
	}
	if counts["referrers"] < 1 || counts["referrers"] > n {
		t.Errorf("%d referrers requests; want 1 to %d, at most one per artifact", counts["referrers"], n)
	}
	if counts["tags"] != 0 || counts["other"] != 0 {
		t.Errorf("requests %v; want no tag list and nothing else", counts)
	}
}

func isReferrers(r *http.Request) bool { return strings.Contains(r.URL.Path, "/referrers/") }

func isFallbackTag(r *http.Request) bool {
	return strings.Contains(r.URL.Path, "/manifests/sha256-")
}

// While a registry's answer on the referrers API is unknown, each look-up asks the API and its
// fallback tag together: the registry holds back every referrers answer until all 20 fallback
// tags were asked, which look-ups that waited for the first API answer could never satisfy. Once
// the API answered 404, the next pull in the same command goes straight to the fallback tags.
func TestReferrersAndFallbackTagAskedTogether(t *testing.T) {
	t.Parallel()
	const n = 20
	reg := registrytest.Start(t)
	g, front := startGatedFront(t, reg.Addr(), n, isFallbackTag, isReferrers)
	pusher := pulltest.OpenStore(t, "oci://"+reg.Addr()+"/murmur", ocistore.Options{})
	var reqs []pull.Request
	for i := range n {
		name := ref.Name{Scope: "acme", Name: fmt.Sprintf("ref%02d", i)}
		pulltest.Push(t, pusher, name, "1.0.0", "any", pulltest.Pack(t, name.Name, "1.0.0", uint64(1100+i)))
		reqs = append(reqs, pulltest.Req(name, "1.0.0"))
	}
	st := pulltest.OpenStore(t, "oci://"+front+"/murmur", ocistore.Options{Pool: ocistore.NewPool()})
	count := func(is func(*http.Request) bool) int {
		c := 0
		for _, line := range g.requests() {
			method, path, _ := strings.Cut(line, " ")
			if is(&http.Request{Method: method, URL: &url.URL{Path: path}}) {
				c++
			}
		}
		return c
	}
	w := pulltest.NewWorld(t)
	pl := w.Puller(st)
	pl.Provenance.Verifier = &sigstore.Local{}
	w.MustPull(pl, reqs...)
	if r, f := count(isReferrers), count(isFallbackTag); r != n || f != n {
		t.Errorf("%d referrers and %d fallback tag requests; want %d of each", r, f, n)
	}
	w2 := pulltest.NewWorld(t)
	pl2 := w2.Puller(st)
	pl2.Provenance.Verifier = &sigstore.Local{}
	w2.MustPull(pl2, reqs...)
	if r, f := count(isReferrers), count(isFallbackTag); r != n || f != 2*n {
		t.Errorf("after the API answered 404: %d referrers and %d fallback tag requests in all; want %d and %d", r, f, n, 2*n)
	}
}
