package fetch_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/fetch/proxytest"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
)

// mirrorWorld is a store the artifacts come from and a mirror registry behind a counting proxy.
func mirrorWorld(t *testing.T) (src store.Store, mirror store.Store, px *proxytest.Proxy) {
	src = layoutStore(t)
	reg := registrytest.StartFaulty(t)
	px = proxytest.Start(t, reg.Addr(), proxytest.Options{})
	return src, openStore(t, "oci://"+px.Addr()+"/murmur", ocistore.Options{}), px
}

func (w *world) mirroring(mirror store.Store, stores ...store.Store) *fetch.Puller {
	pl := w.puller(stores...)
	pl.Mirror.Store = mirror
	return pl
}

func TestWriteThroughPushesWhatWasBroughtIn(t *testing.T) {
	src, mirror, px := mirrorWorld(t)
	p := pack(t, "grep", "1.0.0", 401)
	push(t, src, grep, "1.0.0", "linux-x86_64", p)
	w := newWorld(t)
	res := w.mustPull(w.mirroring(mirror, src), req(grep, "1.0.0"))[0]
	if res.Mirror == nil || !res.Mirror.Pushed || res.Mirror.Store != mirror.String() || len(res.Warnings) != 0 {
		t.Fatalf("result %+v (mirror %+v)", res, res.Mirror)
	}
	d, err := mirror.Resolve(context.Background(), grep, "1.0.0", "linux-x86_64")
	if err != nil || d.Digest != p.digest() || d.Platform != "linux-x86_64" {
		t.Fatalf("the mirror holds %+v, %v", d, err)
	}
	rec := w.lastRecord()
	if rec.Outcome != cas.OutcomeMirrored || rec.Source != mirror.String() || rec.Digest != p.digest() {
		t.Fatalf("last record %+v", rec)
	}
	// Pulled again, a cache hit the records know is mirrored costs the mirror nothing.
	before := px.Requests("")
	res = w.mustPull(w.mirroring(mirror, src), req(grep, "1.0.0"))[0]
	if !res.CacheHit || res.Mirror != nil || px.Requests("") != before {
		t.Fatalf("a warm pull: %+v, %d mirror requests", res, px.Requests("")-before)
	}
}

// What the CAS held before a mirror was set is pushed on the next pull, once.
func TestWriteThroughPushesCacheHitsNotYetMirrored(t *testing.T) {
	src, mirror, _ := mirrorWorld(t)
	p := pack(t, "grep", "1.0.0", 402)
	push(t, src, grep, "1.0.0", "any", p)
	w := newWorld(t)
	w.mustPull(w.puller(src), req(grep, "1.0.0"))
	res := w.mustPull(w.mirroring(mirror, src), req(grep, "1.0.0"))[0]
	if !res.CacheHit || res.Mirror == nil || !res.Mirror.Pushed {
		t.Fatalf("result %+v", res)
	}
	if d, err := mirror.Resolve(context.Background(), grep, "1.0.0", "any"); err != nil || d.Digest != p.digest() {
		t.Fatalf("the mirror holds %+v, %v", d, err)
	}
}

// An artifact pulled from the mirror itself is not pushed back.
func TestWriteThroughSkipsWhatCameFromTheMirror(t *testing.T) {
	src, mirror, px := mirrorWorld(t)
	p := pack(t, "grep", "1.0.0", 403)
	push(t, src, grep, "1.0.0", "any", p)
	push(t, mirror, grep, "1.0.0", "any", p)
	push(t, mirror, seed, "1.0.0", "any", pack(t, "seed", "1.0.0", 413))
	w := newWorld(t)
	uploads := px.Requests("/v2/murmur/acme/grep/blobs/uploads/")
	pl := w.mirroring(mirror, mirror, src)
	pl.Limits.Jobs = 1 // the second artifact's pull record comes after the records were read
	both := w.mustPull(pl, req(grep, "1.0.0"), req(seed, "1.0.0"))
	for _, r := range both {
		if r.Origin != mirror.String() || r.Mirror != nil {
			t.Fatalf("result %+v", r)
		}
	}
	if n := px.Requests("/v2/murmur/acme/grep/blobs/uploads/") - uploads; n != 0 {
		t.Fatalf("the pull pushed to the mirror it pulled from (%d upload requests)", n)
	}
	// A cache hit of it later knows from the records that the mirror has it.
	res := w.mustPull(w.mirroring(mirror, src), req(grep, "1.0.0"))[0]
	if !res.CacheHit || res.Mirror != nil {
		t.Fatalf("result %+v", res)
	}
}

// A mirror that fails is a warning, and the next pull tries again; with MirrorRequired it fails
// the command, after the artifact is pinned here.
func TestWriteThroughFailure(t *testing.T) {
	src := layoutStore(t)
	p := pack(t, "grep", "1.0.0", 404)
	push(t, src, grep, "1.0.0", "any", p)
	dead := openStore(t, "oci://127.0.0.1:1/murmur", ocistore.Options{Retries: -1, Timeout: time.Second})
	w := newWorld(t)
	res := w.mustPull(w.mirroring(dead, src), req(grep, "1.0.0"))[0]
	if res.Mirror == nil || res.Mirror.Pushed || res.Mirror.Error == "" || res.Mirror.Token == "" || len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "the next pull or warm tries again") {
		t.Fatalf("result %+v (mirror %+v)", res, res.Mirror)
	}
	res = w.mustPull(w.mirroring(dead, src), req(grep, "1.0.0"))[0]
	if !res.CacheHit || res.Mirror == nil || res.Mirror.Pushed {
		t.Fatalf("the next pull did not try again: %+v", res)
	}
	pl := w.mirroring(dead, src)
	pl.Mirror.Required = true
	res2, err := w.pull(pl, req(grep, "1.0.0"))
	errtest.WantToken(t, err, errs.Network, dead.String(), "mirror_required", "pinned")
	if res2[0].Digest != p.digest().String() || w.readLock().Find("acme/grep") == nil {
		t.Fatalf("result %+v; lock %+v", res2[0], w.readLock())
	}
}

// An offline pull pushes nothing.
func TestWriteThroughOffline(t *testing.T) {
	src, mirror, px := mirrorWorld(t)
	p := pack(t, "grep", "1.0.0", 405)
	push(t, src, grep, "1.0.0", "any", p)
	w := newWorld(t)
	w.mustPull(w.puller(src), req(grep, "1.0.0"))
	pl := w.mirroring(mirror, src)
	pl.Offline = true
	before := px.Requests("")
	res := w.mustPull(pl, req(grep, "1.0.0"))[0]
	if res.Mirror != nil || px.Requests("") != before {
		t.Fatalf("an offline pull wrote through: %+v", res)
	}
}

// Warming every platform writes each one through, into one index.
func TestWriteThroughEveryPlatformWarmed(t *testing.T) {
	src, mirror, _ := mirrorWorld(t)
	a, b := pack(t, "grep", "1.0.0", 406), pack(t, "grep", "1.0.0", 407)
	push(t, src, grep, "1.0.0", "linux-x86_64", a)
	push(t, src, grep, "1.0.0", "darwin-aarch64", b)
	w := newWorld(t)
	pl := w.puller(src)
	w.mustPull(pl, req(grep, "1.0.0"))
	pl.Platform = "darwin-aarch64"
	w.mustPull(pl, req(grep, "1.0.0"))
	w2 := newWorld(t)
	w2.proj = w.proj
	if _, err := fetch.Warm(context.Background(), fetch.WarmInput{Project: w.proj, Lock: w.readLock(), Platform: "all", Puller: w2.mirroring(mirror, src)}); err != nil {
		t.Fatal(err)
	}
	for plat, p := range map[string]packed{"linux-x86_64": a, "darwin-aarch64": b} {
		d, err := mirror.Resolve(context.Background(), grep, "1.0.0", plat)
		if err != nil || d.Digest != p.digest() || d.Platform != plat {
			t.Errorf("%s: the mirror holds %+v, %v", plat, d, err)
		}
	}
}
