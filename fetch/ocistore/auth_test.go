package ocistore_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/ref"
)

// countingTransport counts the requests a store sends, by kind and answer: "ping 401",
// "token 200", "manifest 200", "blob 200", "ping err" (the https attempt at a plain loopback
// registry).
type countingTransport struct {
	inner http.RoundTripper
	mu    sync.Mutex
	n     map[string]int
}

func newCounting() *countingTransport {
	return &countingTransport{inner: http.DefaultTransport.(*http.Transport).Clone(), n: map[string]int{}}
}

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.inner.RoundTrip(req)
	kind := "other"
	p := req.URL.Path
	switch {
	case p == "/v2/" || p == "/v2":
		kind = "ping"
	case p == "/token":
		kind = "token"
	case strings.Contains(p, "/manifests/"):
		kind = "manifest"
	case strings.Contains(p, "/blobs/uploads"):
		kind = "upload"
	case strings.Contains(p, "/blobs/"):
		kind = "blob"
	case strings.HasSuffix(p, "/tags/list"):
		kind = "tags"
	}
	status := "err"
	if err == nil {
		status = fmt.Sprint(resp.StatusCode)
	}
	c.mu.Lock()
	c.n[kind+" "+status]++
	c.mu.Unlock()
	return resp, err
}

func (c *countingTransport) counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.n {
		out[k] = v
	}
	return out
}

// sum adds the counts of every answer to requests of kind.
func sum(counts map[string]int, kind string) int {
	n := 0
	for k, v := range counts {
		if strings.HasPrefix(k, kind+" ") {
			n += v
		}
	}
	return n
}

type registryKind struct {
	name   string
	bearer bool
	start  func(t *testing.T) (addr string, expire func())
}

var registryKinds = []registryKind{
	{"docker-registry", false, func(t *testing.T) (string, func()) { return registrytest.Start(t).Addr(), nil }},
	{"in-process", false, func(t *testing.T) (string, func()) { return registrytest.StartInProcess(t, nil).Addr(), nil }},
	{"docker-registry-bearer", true, func(t *testing.T) (string, func()) {
		b := registrytest.StartBearer(t)
		return b.Addr(), b.Expire
	}},
	{"in-process-bearer", true, func(t *testing.T) (string, func()) {
		b := registrytest.StartInProcessBearer(t, nil)
		return b.Addr(), b.Expire
	}},
}

// pushMany pushes n small artifacts to addr through a store of its own, and returns their
// names and descriptors.
func pushMany(t *testing.T, addr string, n int) ([]ref.Name, []store.Descriptor) {
	t.Helper()
	pusher := open(t, "oci://"+addr+"/murmur", ocistore.Options{Keychain: staticKeychain{}})
	names := make([]ref.Name, n)
	descs := make([]store.Descriptor, n)
	for i := range n {
		names[i] = ref.Name{Scope: "acme", Name: fmt.Sprintf("tool%02d", i)}
		descs[i] = push(t, pusher, names[i], "1.0.0", ref.PlatformAny, payload(4<<10, uint64(i)))
	}
	return names, descs
}

// pullAll resolves and reads every artifact through s, jobs at a time.
func pullAll(t *testing.T, s store.Store, names []ref.Name, descs []store.Descriptor, jobs int) {
	t.Helper()
	sem := make(chan struct{}, jobs)
	var wg sync.WaitGroup
	errc := make(chan error, len(names))
	for i := range names {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer func() { <-sem; wg.Done() }()
			d, err := s.Resolve(context.Background(), names[i], "1.0.0", ref.HostPlatform())
			if err != nil {
				errc <- err
				return
			}
			if d.Digest != descs[i].Digest {
				errc <- fmt.Errorf("%s resolved to %s, pushed %s", names[i], d.Digest, descs[i].Digest)
				return
			}
			rc, err := s.Open(context.Background(), names[i], d.Digest)
			if err != nil {
				errc <- err
				return
			}
			defer rc.Close()
			got := readAllFrom(rc)
			if got != descs[i].Size {
				errc <- fmt.Errorf("%s: read %d bytes, want %d", names[i], got, descs[i].Size)
			}
		}(i)
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
}

func readAllFrom(rc interface{ Read([]byte) (int, error) }) int64 {
	buf := make([]byte, 32<<10)
	var n int64
	for {
		m, err := rc.Read(buf)
		n += int64(m)
		if err != nil {
			return n
		}
	}
}

// TestOneTransportPerRegistry pulls 20 artifacts, 8 at a time, through one store: the registry
// is pinged once, a Bearer registry hands out one token per repository, and no request is
// answered 401 (a request sent without the token it needs).
func TestOneTransportPerRegistry(t *testing.T) {
	for _, k := range registryKinds {
		t.Run(k.name, func(t *testing.T) {
			addr, _ := k.start(t)
			names, descs := pushMany(t, addr, 20)
			ct := newCounting()
			s := open(t, "oci://"+addr+"/murmur", ocistore.Options{Keychain: staticKeychain{}, Transport: ct})
			pullAll(t, s, names, descs, 8)
			c := ct.counts()
			t.Logf("%v", c)
			// A loopback registry is pinged over https and http at once (go-containerregistry's
			// rule for a host that may be either); one of them answers.
			if sum(c, "ping") > 2 || c["ping 200"]+c["ping 401"] != 1 {
				t.Errorf("pings: %v; want one answered ping for 20 artifacts", c)
			}
			wantTokens := 0
			if k.bearer {
				wantTokens = 20
			}
			if got := sum(c, "token"); got != wantTokens {
				t.Errorf("token requests: %d, want %d (one per repository)", got, wantTokens)
			}
			for _, kind := range []string{"manifest", "blob", "tags"} {
				if c[kind+" 401"] != 0 {
					t.Errorf("%d %s requests were answered 401: each should carry its token", c[kind+" 401"], kind)
				}
			}
			if c["manifest 200"] != 20 || c["blob 200"] != 20 {
				t.Errorf("manifests %d, blobs %d; want 20 of each", c["manifest 200"], c["blob 200"])
			}
			// Pulling the same again costs no ping and no token.
			before := c
			pullAll(t, s, names, descs, 8)
			c = ct.counts()
			if sum(c, "ping") != sum(before, "ping") || sum(c, "token") != sum(before, "token") {
				t.Errorf("a second pull pinged or fetched tokens again: before %v, after %v", before, c)
			}
		})
	}
}

// TestTokenRefreshOn401 expires every token the registry issued: the next request is answered
// 401, the transport fetches a new token for that repository once, and the pull goes on.
func TestTokenRefreshOn401(t *testing.T) {
	for _, k := range registryKinds {
		if !k.bearer {
			continue
		}
		t.Run(k.name, func(t *testing.T) {
			addr, expire := k.start(t)
			names, descs := pushMany(t, addr, 1)
			ct := newCounting()
			s := open(t, "oci://"+addr+"/murmur", ocistore.Options{Keychain: staticKeychain{}, Transport: ct})
			pullAll(t, s, names, descs, 1)
			before := ct.counts()
			expire()
			pullAll(t, s, names, descs, 1)
			c := ct.counts()
			if got := sum(c, "token") - sum(before, "token"); got != 1 {
				t.Errorf("after expiry: %d token requests, want 1 (%v)", got, c)
			}
			if got := c["manifest 401"] - before["manifest 401"]; got != 1 {
				t.Errorf("after expiry: %d manifest requests answered 401, want 1 (%v)", got, c)
			}
			if sum(c, "ping") != sum(before, "ping") {
				t.Errorf("a refresh pinged again: %v", c)
			}
		})
	}
}

// TestConcurrentFirstUse starts ten pulls of one artifact at once on a fresh store: they wait
// for one ping and one token exchange instead of each making its own.
func TestConcurrentFirstUse(t *testing.T) {
	b := registrytest.StartInProcessBearer(t, nil)
	names, descs := pushMany(t, b.Addr(), 1)
	ct := newCounting()
	s := open(t, "oci://"+b.Addr()+"/murmur", ocistore.Options{Keychain: staticKeychain{}, Transport: ct})
	many := make([]ref.Name, 10)
	manyDescs := make([]store.Descriptor, 10)
	for i := range many {
		many[i], manyDescs[i] = names[0], descs[0]
	}
	pullAll(t, s, many, manyDescs, 10)
	c := ct.counts()
	if sum(c, "token") != 1 || c["ping 200"]+c["ping 401"] != 1 {
		t.Errorf("ten concurrent first pulls: %v; want one answered ping and one token", c)
	}
}

// TestPoolSharesARegistry opens two stores (two prefixes) on one registry: with a Pool they
// share one ping, without one each pings.
func TestPoolSharesARegistry(t *testing.T) {
	reg := registrytest.StartInProcess(t, nil)
	pusherA := open(t, "oci://"+reg.Addr()+"/a", ocistore.Options{})
	pusherB := open(t, "oci://"+reg.Addr()+"/b", ocistore.Options{})
	da := push(t, pusherA, grep, "1.0.0", ref.PlatformAny, payload(1<<10, 1))
	db := push(t, pusherB, grep, "1.0.0", ref.PlatformAny, payload(1<<10, 2))
	for _, pooled := range []bool{true, false} {
		ct := newCounting()
		var pool *ocistore.Pool
		if pooled {
			pool = ocistore.NewPool()
		}
		a := open(t, "oci://"+reg.Addr()+"/a", ocistore.Options{Transport: ct, Pool: pool})
		b := open(t, "oci://"+reg.Addr()+"/b", ocistore.Options{Transport: ct, Pool: pool})
		pullAll(t, a, []ref.Name{grep}, []store.Descriptor{da}, 1)
		pullAll(t, b, []ref.Name{grep}, []store.Descriptor{db}, 1)
		want := 2
		if pooled {
			want = 1
		}
		if got := ct.counts()["ping 200"]; got != want {
			t.Errorf("pooled=%v: %d answered pings, want %d", pooled, got, want)
		}
	}
}
