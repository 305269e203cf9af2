package fetch_test

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
	"github.com/murmur-nexus/mur/internal/ref"
)

// A cold pull of 20 artifacts that looks for provenance (prefer, a verifier) on a registry
// without the referrers API (docker-registry answers 404): the referrers API is asked once, and
// every other look-up goes straight to its sha256-<hex> fallback tag, with the subject manifest
// the resolve already read (no second read of the version's tag). And the look-ups run beside the
// downloads, not after them: the registry holds back every blob until every artifact's fallback
// tag was asked, which a pull that looked up bundles after each download could never satisfy.
func TestPullOf20LooksUpReferrersBesideTheBlobs(t *testing.T) {
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
	pusher := openStore(t, "oci://"+reg.Addr()+"/murmur", ocistore.Options{})
	var reqs []pull.Request
	for i := range n {
		name := ref.Name{Scope: "acme", Name: fmt.Sprintf("tool%02d", i)}
		push(t, pusher, name, "1.0.0", "any", pack(t, name.Name, "1.0.0", uint64(700+i)))
		reqs = append(reqs, req(name, "1.0.0"))
	}
	w := newWorld(t)
	pl := w.puller(openStore(t, addr, ocistore.Options{Pool: ocistore.NewPool()}))
	pl.Provenance.Verifier = &sigstore.Local{}
	res := w.mustPull(pl, reqs...)
	for _, r := range res {
		if len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "no provenance bundle") {
			t.Errorf("%s: warnings %q; want the one no-provenance warning", r.Name, r.Warnings)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	want := map[string]int{"ping": 1, "manifest": n, "referrers": 1, "fallback": n, "blob": n}
	for k, v := range want {
		if counts[k] != v {
			t.Errorf("%d %s requests; want %d (all: %v)", counts[k], k, v, counts)
		}
	}
	if counts["tags"] != 0 || counts["other"] != 0 {
		t.Errorf("requests %v; want no tag list and nothing else", counts)
	}
}
