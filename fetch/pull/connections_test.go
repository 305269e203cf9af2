package pull_test

import (
	"strings"
	"testing"

	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/fetch/provenance/sigstore"
	"github.com/murmur-nexus/mur/fetch/proxytest"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
)

// A cold pull of 20 artifacts that looks for provenance on a registry without the referrers API
// (docker-registry) asks what it must and no more, over about one connection per artifact:
//   - one referrers request, the probe: one per look-up, racing the registry's first 404, is what
//     a look-up that did not wait for the probe's answer sends;
//   - one manifest, one blob and one fallback tag per artifact, and the ping: a look-up that read
//     the version's tag again, or asked the referrers API after the 404, sends more;
//   - at most 20 connections and 3 more (the ping's TLS hello that a plain-HTTP registry refuses,
//     the probe's, one spare): a look-up sent beside its blob opens a second connection per
//     artifact, and an answer closed unread (the referrers 404) gives up its connection, so that
//     the next request opens one.
func TestPullOf20UsesAConnectionPerArtifact(t *testing.T) {
	t.Parallel()
	const n = 20
	reg := registrytest.Start(t)
	reqs := pulltest.PushMany(t, pulltest.OpenStore(t, "oci://"+reg.Addr()+"/murmur", ocistore.Options{}), "conn", n, 0, 1300)
	px := proxytest.Start(t, reg.Addr(), proxytest.Options{})
	w := pulltest.NewWorld(t)
	pl := w.Puller(pulltest.OpenStore(t, "oci://"+px.Addr()+"/murmur", ocistore.Options{Pool: ocistore.NewPool()}))
	pl.Provenance.Verifier = &sigstore.Local{}
	w.MustPull(pl, reqs...)
	counts := map[string]int{}
	for _, l := range px.Log() {
		counts[requestKind(l.Path)]++
	}
	want := map[string]int{"ping": 1, "referrers": 1, "manifest": n, "blob": n, "fallback": n}
	for k, v := range want {
		if counts[k] != v {
			t.Errorf("%d %s requests; want %d (all: %v)", counts[k], k, v, counts)
		}
	}
	if counts["other"] != 0 {
		t.Errorf("requests %v; want nothing else", counts)
	}
	if c := px.Connections(); c > n+3 {
		t.Errorf("%d connections for %d artifacts; want at most %d", c, n, n+3)
	}
}

// requestKind sorts a registry request by what it asks for.
func requestKind(p string) string {
	switch {
	case p == "/v2/" || p == "/v2":
		return "ping"
	case strings.Contains(p, "/referrers/"):
		return "referrers"
	case strings.Contains(p, "/manifests/sha256-"):
		return "fallback"
	case strings.Contains(p, "/manifests/"):
		return "manifest"
	case strings.Contains(p, "/blobs/"):
		return "blob"
	}
	return "other"
}
