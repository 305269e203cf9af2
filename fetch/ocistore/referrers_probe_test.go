package ocistore_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/fetch/proxytest"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/internal/slowdown"
)

// A registry is asked about the referrers API once, however many look-ups start together: the
// registry holds its answer until every look-up has asked its fallback tag, so the look-ups that
// came while the probe was out asked their tags at once rather than waiting, and none of them
// sent a referrers request of its own (each did, racing the first 404, before). Stores sharing a
// Pool share the answer: a second store of the same registry asks no referrers API at all.
func TestReferrersProbedOncePerRegistry(t *testing.T) {
	const n = 10
	f := registrytest.StartFaulty(t)
	addr := "oci://" + f.Addr() + "/murmur"
	pusher := open(t, addr, ocistore.Options{})
	names := make([]ref.Name, n)
	descs := make([]store.Descriptor, n)
	for i := range n {
		names[i] = ref.Name{Scope: "acme", Name: fmt.Sprintf("probe%d", i)}
		descs[i] = push(t, pusher, names[i], "1.0.0", "any", payload(100, uint64(500+i)))
	}
	var referrers, fallbacks atomic.Int64
	allAsked := make(chan struct{})
	var once sync.Once
	f.Arm(func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		switch {
		case strings.Contains(r.URL.Path, "/referrers/"):
			referrers.Add(1)
			select {
			case <-allAsked:
			case <-time.After(slowdown.Scale(30 * time.Second)):
				t.Errorf("the referrers probe waited for %d fallback tags, which never came: the look-ups wait for the probe before asking them", n)
			}
		case strings.Contains(r.URL.Path, "/manifests/sha256-"):
			if fallbacks.Add(1) == n {
				once.Do(func() { close(allAsked) })
			}
		}
		next.ServeHTTP(w, r)
	})
	pool := ocistore.NewPool()
	s := open(t, addr, ocistore.Options{Pool: pool}).(store.BundleFinder)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if b, err := s.Bundles(context.Background(), names[i], "1.0.0", descs[i].Digest); err != nil || len(b) != 0 {
				t.Errorf("%s: bundles %d, %v; want none", names[i], len(b), err)
			}
		}()
	}
	wg.Wait()
	if got := referrers.Load(); got != 1 {
		t.Errorf("%d referrers requests for %d look-ups; want the one probe", got, n)
	}
	other := open(t, addr, ocistore.Options{Pool: pool}).(store.BundleFinder)
	if _, err := other.Bundles(context.Background(), names[0], "1.0.0", descs[0].Digest); err != nil {
		t.Fatal(err)
	}
	if got := referrers.Load(); got != 1 {
		t.Errorf("another store of the same registry and pool asked the referrers API again (%d requests in all)", got)
	}
}

// A probe that fails is not the registry's answer: the look-up that sent it fails, and the next
// look-up probes again, and once that one has the registry's answer, nothing asks again.
func TestFailedReferrersProbeIsAskedAgain(t *testing.T) {
	f := registrytest.StartFaulty(t)
	addr := "oci://" + f.Addr() + "/murmur"
	desc := push(t, open(t, addr, ocistore.Options{}), grep, "1.0.0", "any", payload(100, 600))
	var referrers atomic.Int64
	var refuse atomic.Bool
	refuse.Store(true)
	f.Arm(func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		if strings.Contains(r.URL.Path, "/referrers/") {
			referrers.Add(1)
			if refuse.Load() {
				http.Error(w, `{"errors":[{"code":"DENIED","message":"no"}]}`, http.StatusForbidden)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
	s := open(t, addr, ocistore.Options{}).(store.BundleFinder)
	_, err := s.Bundles(context.Background(), grep, "1.0.0", desc.Digest)
	errtest.WantToken(t, err, errs.Denied)
	refuse.Store(false)
	for range 2 {
		if _, err := s.Bundles(context.Background(), grep, "1.0.0", desc.Digest); err != nil {
			t.Fatal(err)
		}
	}
	if got := referrers.Load(); got != 2 {
		t.Errorf("%d referrers requests; want 2: the failed probe and the one after it", got)
	}
}

// The probe's 404 is read to its end, so that its connection serves the next request: after one
// look-up (the probe and its fallback tag, side by side on two connections), two look-ups at once
// (their fallback tags, which the registry answers only once both are in) need no third.
//
// A loaded machine can only add connections, never save one: Go's transport drops a connection
// whose request write it hasn't seen confirmed within 50 ms of the answer. So the scenario runs
// afresh (a new proxy and store) up to five times and passes on the first that opens none; a 404
// left unread costs its connection every time.
func TestReferrers404KeepsItsConnection(t *testing.T) {
	f := registrytest.StartFaulty(t)
	var names []ref.Name
	var descs []store.Descriptor
	pusher := open(t, "oci://"+f.Addr()+"/murmur", ocistore.Options{})
	for i := range 3 {
		names = append(names, ref.Name{Scope: "acme", Name: fmt.Sprintf("keep%d", i)})
		descs = append(descs, push(t, pusher, names[i], "1.0.0", "any", payload(100, uint64(700+i))))
	}
	var extra []string
	for range 5 {
		opened, before := lookUpTwoAtOnce(t, f, names, descs)
		if opened == 0 {
			return
		}
		extra = append(extra, fmt.Sprintf("%d beside the %d the first one left", opened, before))
	}
	t.Errorf("in each of five tries, the two look-ups opened connections: %s", strings.Join(extra, "; "))
}

// lookUpTwoAtOnce runs TestReferrers404KeepsItsConnection's scenario once, through a proxy and a
// store of its own, and says how many connections the two look-ups opened beside the first one's.
func lookUpTwoAtOnce(t *testing.T, f *registrytest.Faulty, names []ref.Name, descs []store.Descriptor) (opened, before int) {
	t.Helper()
	var fallbacks atomic.Int64
	both := make(chan struct{})
	f.Arm(func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		if strings.Contains(r.URL.Path, "/manifests/sha256-") && fallbacks.Add(1) == 3 {
			close(both)
		}
		if strings.Contains(r.URL.Path, "/manifests/sha256-") && fallbacks.Load() >= 2 {
			select {
			case <-both:
			case <-time.After(slowdown.Scale(30 * time.Second)):
				t.Error("the two look-ups' fallback tags were not asked together")
			}
		}
		next.ServeHTTP(w, r)
	})
	px := proxytest.Start(t, f.Addr(), proxytest.Options{})
	defer px.Close()
	s := open(t, "oci://"+px.Addr()+"/murmur", ocistore.Options{}).(store.BundleFinder)
	if _, err := s.Bundles(context.Background(), names[0], "1.0.0", descs[0].Digest); err != nil {
		t.Fatal(err)
	}
	before = px.Connections()
	var wg sync.WaitGroup
	for i := 1; i <= 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.Bundles(context.Background(), names[i], "1.0.0", descs[i].Digest); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	return px.Connections() - before, before
}
