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
	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/internal/ref"
)

// gatedFront is a front for a registry that holds back the answers to the gated requests until
// n counted ones have arrived: a pull that sends a counted request only after a gated one's
// answer never gets there. Not a timing condition: the guard only turns a hang into a failure.
type gatedFront struct {
	t              *testing.T
	n              int
	counted, gated func(*http.Request) bool
	guard          time.Duration

	mu      sync.Mutex
	arrived int
	all     chan struct{}
	gaveUp  chan struct{}
	giveUp  sync.Once
	log     []string // "METHOD path", in arrival order
}

func startGatedFront(t *testing.T, upstream string, n int, counted, gated func(*http.Request) bool) (*gatedFront, string) {
	g := &gatedFront{t: t, n: n, counted: counted, gated: gated, guard: time.Minute, all: make(chan struct{}), gaveUp: make(chan struct{})}
	u, _ := url.Parse("http://" + upstream)
	rp := httputil.NewSingleHostReverseProxy(u)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		g.log = append(g.log, r.Method+" "+r.URL.Path)
		isGated := g.gated(r)
		if g.counted(r) {
			g.arrived++
			if g.arrived == g.n {
				close(g.all)
			}
		}
		g.mu.Unlock()
		if isGated {
			select {
			case <-g.all:
			case <-g.gaveUp:
			case <-time.After(g.guard):
				g.t.Errorf("%s waited %v for %d requests to arrive: they are not sent together", r.URL.Path, g.guard, g.n)
				g.giveUp.Do(func() { close(g.gaveUp) })
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	return g, strings.TrimPrefix(front.URL, "http://")
}

func (g *gatedFront) requests() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.log...)
}

func isManifestByTag(r *http.Request) bool {
	return strings.Contains(r.URL.Path, "/manifests/") && !strings.Contains(r.URL.Path, "/manifests/sha256")
}

// A cold pull of 20 artifacts from a registry whose health is unknown asks all 20 manifests at
// once, after the one ping: the registry holds back every manifest until all 20 were asked, which
// a pull that waited for a first manifest's answer before asking the others could never satisfy.
func TestPullOf20AsksEveryManifestAtOnce(t *testing.T) {
	t.Parallel()
	const n = 20
	reg := registrytest.Start(t)
	g, front := startGatedFront(t, reg.Addr(), n, isManifestByTag, isManifestByTag)
	pusher := pulltest.OpenStore(t, "oci://"+reg.Addr()+"/murmur", ocistore.Options{})
	var reqs []pull.Request
	for i := range n {
		name := ref.Name{Scope: "acme", Name: fmt.Sprintf("fan%02d", i)}
		pulltest.Push(t, pusher, name, "1.0.0", "any", pulltest.Pack(t, name.Name, "1.0.0", uint64(900+i)))
		reqs = append(reqs, pulltest.Req(name, "1.0.0"))
	}
	w := pulltest.NewWorld(t)
	pl := w.Puller(pulltest.OpenStore(t, "oci://"+front+"/murmur", ocistore.Options{Pool: ocistore.NewPool()}))
	w.MustPull(pl, reqs...)
	log := g.requests()
	if len(log) == 0 || log[0] != "GET /v2/" {
		t.Fatalf("requests %q; want the ping first", log)
	}
	pings, manifests := 0, 0
	for _, r := range log {
		switch {
		case r == "GET /v2/":
			pings++
		case strings.Contains(r, "/manifests/"):
			manifests++
		}
	}
	if pings != 1 || manifests != n {
		t.Errorf("%d pings and %d manifest requests; want 1 and %d: %q", pings, manifests, n, log)
	}
}
