package pull_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/murmur-nexus/mur/fetch/config"
	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/fetch/provenance/sigstore"
	"github.com/murmur-nexus/mur/fetch/publish"
	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
)

// signedTools packs acme/tool0 … tool<n-1> at 1.0.0 and signs each with one fresh key: the items
// to push, and a Puller's provenance that requires that key's signature.
func signedTools(t *testing.T, n int, seed uint64) ([]publish.Item, []pull.Request, pull.Provenance) {
	t.Helper()
	priv, pub := pulltest.ECDSAKey(t)
	local := &sigstore.Local{}
	var items []publish.Item
	var reqs []pull.Request
	var hint string
	for i := range n {
		name := fmt.Sprintf("tool%d", i)
		path := filepath.Join(t.TempDir(), name+"-1.0.0.mur.zip")
		if err := os.WriteFile(path, pulltest.Pack(t, name, "1.0.0", seed+uint64(i)).Zip, 0o644); err != nil {
			t.Fatal(err)
		}
		item, err := publish.FromFile(path, "acme", "any")
		if err != nil {
			t.Fatal(err)
		}
		if hint, err = publish.Sign(context.Background(), local, &item, priv); err != nil {
			t.Fatal(err)
		}
		items = append(items, item)
		reqs = append(reqs, pulltest.Req(item.Desc.Name, "1.0.0"))
	}
	return items, reqs, pull.Provenance{Verifier: local, Policy: func(string) config.ProvenancePolicy {
		return config.ProvenancePolicy{Mode: config.ProvenanceRequire, Trust: provenance.Trust{Keys: []provenance.TrustedKey{{Hint: hint, PEM: pub}}}}
	}}
}

func pushAll(t *testing.T, st store.Store, items []publish.Item, bundles bool) {
	t.Helper()
	for _, it := range items {
		if !bundles {
			it.Bundles = nil
		}
		if err := publish.Push(context.Background(), st, it); err != nil {
			t.Fatal(err)
		}
	}
}

// lookWorld is a layout serving signed acme/tool0…2 and a mirror that answers the HEAD of any
// manifest by digest with 500; pl pulls them requiring their signatures.
type lookWorld struct {
	m      *readOnlyMirror
	mirror store.Store
	items  []publish.Item
	reqs   []pull.Request
	w      *pulltest.World
	pl     *pull.Puller
	mu     sync.Mutex
	warned []string
}

// bundleLookFails is a lookWorld whose mirror holds the artifacts, without their bundles, when
// holds.
func bundleLookFails(t *testing.T, seed uint64, holds bool) *lookWorld {
	lw := &lookWorld{}
	var prov pull.Provenance
	lw.items, lw.reqs, prov = signedTools(t, 3, seed)
	src := pulltest.LayoutStore(t)
	pushAll(t, src, lw.items, true)
	lw.m = startReadOnlyMirror(t)
	lw.mirror = pulltest.OpenStore(t, lw.m.addr(), ocistore.Options{})
	if holds {
		pushAll(t, lw.mirror, lw.items, false)
	}
	lw.m.headFor, lw.m.headStatus = "/manifests/sha256:", http.StatusInternalServerError
	lw.w = pulltest.NewWorld(t)
	lw.pl = mirroring(lw.w, lw.mirror, src)
	lw.pl.Provenance = prov
	lw.pl.Report.Warn = func(msg string) { lw.mu.Lock(); lw.warned = append(lw.warned, msg); lw.mu.Unlock() }
	return lw
}

func (lw *lookWorld) lines() []string {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.warned
}

// A pull-through cache named as mirror holds the artifacts, without the bundles a pull verified:
// asked for a bundle's manifest, it answers 500, as distribution does when its upstream lacks it.
// That HEAD is asked once, not retried; the bundle counts as absent and its write is refused, as
// a cache refuses every write; the command says so in one true line, and asks the mirror nothing
// more, however many artifacts it brings in.
func TestWriteThroughBundleLookServerErrorIsAskedOnce(t *testing.T) {
	t.Parallel()
	lw := bundleLookFails(t, 500, true)
	m, mirror, reqs := lw.m, lw.mirror, lw.reqs
	m.refused.Store(http.StatusMethodNotAllowed)
	writes := m.writes()
	for _, r := range lw.w.MustPull(lw.pl, reqs...) {
		if r.Provenance == nil || r.Mirror == nil || r.Mirror.Pushed || r.Mirror.Token != string(errs.Denied) || len(r.Warnings) != 0 {
			t.Fatalf("%s: provenance %+v, mirror %+v, warnings %q", r.Name, r.Provenance, r.Mirror, r.Warnings)
		}
	}
	if m.headCount() != 1 || m.writes()-writes != 1 {
		t.Fatalf("the mirror was asked %d HEADs of a bundle's manifest and sent %d writes for %d artifacts, want 1 and 1", m.headCount(), m.writes()-writes, len(reqs))
	}
	if lines := lw.lines(); len(lines) != 1 || !strings.Contains(lines[0], mirror.String()) || !strings.Contains(lines[0], "does not accept writes") || strings.Contains(lines[0], "was pushed") {
		t.Fatalf("warned %q, want one line saying the mirror does not accept writes", lines)
	}
}

// A registry whose look fails with 500 but that takes writes gets the bundles: one HEAD each.
func TestWriteThroughBundleLookServerErrorWritesTheBundle(t *testing.T) {
	t.Parallel()
	lw := bundleLookFails(t, 510, false)
	m, mirror, items, reqs := lw.m, lw.mirror, lw.items, lw.reqs
	for _, r := range lw.w.MustPull(lw.pl, reqs...) {
		if r.Mirror == nil || !r.Mirror.Pushed || len(r.Warnings) != 0 {
			t.Fatalf("%s: mirror %+v, warnings %q", r.Name, r.Mirror, r.Warnings)
		}
	}
	if m.headCount() != len(reqs) || len(lw.lines()) != 0 {
		t.Fatalf("%d HEADs of a bundle's manifest for %d artifacts, warned %q", m.headCount(), len(reqs), lw.lines())
	}
	for i, it := range items {
		found, err := mirror.(store.BundleFinder).Bundles(context.Background(), reqs[i].Name, "1.0.0", it.Desc.Digest)
		if err != nil || len(found) != 1 {
			t.Fatalf("%s: %d bundles in the mirror, %v", reqs[i].Name, len(found), err)
		}
	}
}

// The real thing: distribution as a pull-through cache of a registry holding the artifacts under
// other bundles, named as mirror. One line for the command, and no retries of the look.
func TestWriteThroughToAPullThroughCacheHoldingOtherBundles(t *testing.T) {
	t.Parallel()
	items, reqs, prov := signedTools(t, 3, 520)
	src := pulltest.LayoutStore(t)
	pushAll(t, src, items, true)
	upstream := registrytest.StartInProcess(t, nil)
	others, _, _ := signedTools(t, 3, 520) // the same artifacts, signed with another key
	pushAll(t, pulltest.OpenStore(t, "oci://"+upstream.Addr()+"/murmur", ocistore.Options{}), others, true)
	cache := registrytest.StartPullThrough(t, upstream.URL())
	mirror := pulltest.OpenStore(t, "oci://"+cache.Addr()+"/murmur", ocistore.Options{})

	w := pulltest.NewWorld(t)
	pl := mirroring(w, mirror, src)
	pl.Provenance = prov
	var warned []string
	var mu sync.Mutex
	pl.Report.Warn = func(msg string) { mu.Lock(); warned = append(warned, msg); mu.Unlock() }
	for _, r := range w.MustPull(pl, reqs...) {
		if r.Mirror == nil || r.Mirror.Pushed || r.Mirror.Token != string(errs.Denied) || len(r.Warnings) != 0 {
			t.Fatalf("%s: mirror %+v, warnings %q", r.Name, r.Mirror, r.Warnings)
		}
	}
	if len(warned) != 1 || strings.Contains(warned[0], "was pushed") {
		t.Fatalf("warned %q, want one line", warned)
	}
	t.Log(warned[0])
}
