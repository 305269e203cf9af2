package pull_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/fetch/proxytest"
	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
)

// mirrorWorld is a store the artifacts come from and a mirror registry behind a counting proxy.
func mirrorWorld(t *testing.T) (src store.Store, mirror store.Store, px *proxytest.Proxy) {
	src = pulltest.LayoutStore(t)
	reg := registrytest.StartFaulty(t)
	px = proxytest.Start(t, reg.Addr(), proxytest.Options{})
	return src, pulltest.OpenStore(t, "oci://"+px.Addr()+"/murmur", ocistore.Options{}), px
}

func mirroring(w *pulltest.World, mirror store.Store, stores ...store.Store) *pull.Puller {
	pl := w.Puller(stores...)
	pl.Mirror.Store = mirror
	return pl
}

func TestWriteThroughPushesWhatWasBroughtIn(t *testing.T) {
	t.Parallel()
	src, mirror, px := mirrorWorld(t)
	p := pulltest.Pack(t, "grep", "1.0.0", 401)
	pulltest.Push(t, src, grep, "1.0.0", "linux-x86_64", p)
	w := pulltest.NewWorld(t)
	res := w.MustPull(mirroring(w, mirror, src), pulltest.Req(grep, "1.0.0"))[0]
	if res.Mirror == nil || !res.Mirror.Pushed || res.Mirror.Store != mirror.String() || len(res.Warnings) != 0 {
		t.Fatalf("result %+v (mirror %+v)", res, res.Mirror)
	}
	d, err := mirror.Resolve(context.Background(), grep, "1.0.0", "linux-x86_64")
	if err != nil || d.Digest != p.Digest() || d.Platform != "linux-x86_64" {
		t.Fatalf("the mirror holds %+v, %v", d, err)
	}
	rec := lastRecord(w)
	if rec.Outcome != cas.OutcomeMirrored || rec.Source != mirror.String() || rec.Digest != p.Digest() {
		t.Fatalf("last record %+v", rec)
	}
	// Pulled again, a cache hit the records know is mirrored costs the mirror nothing.
	before := px.Requests("")
	res = w.MustPull(mirroring(w, mirror, src), pulltest.Req(grep, "1.0.0"))[0]
	if !res.CacheHit || res.Mirror != nil || px.Requests("") != before {
		t.Fatalf("a warm pull: %+v, %d mirror requests", res, px.Requests("")-before)
	}
}

// What the CAS held before a mirror was set is pushed on the next pull, once.
func TestWriteThroughPushesCacheHitsNotYetMirrored(t *testing.T) {
	t.Parallel()
	src, mirror, _ := mirrorWorld(t)
	p := pulltest.Pack(t, "grep", "1.0.0", 402)
	pulltest.Push(t, src, grep, "1.0.0", "any", p)
	w := pulltest.NewWorld(t)
	w.MustPull(w.Puller(src), pulltest.Req(grep, "1.0.0"))
	res := w.MustPull(mirroring(w, mirror, src), pulltest.Req(grep, "1.0.0"))[0]
	if !res.CacheHit || res.Mirror == nil || !res.Mirror.Pushed {
		t.Fatalf("result %+v", res)
	}
	if d, err := mirror.Resolve(context.Background(), grep, "1.0.0", "any"); err != nil || d.Digest != p.Digest() {
		t.Fatalf("the mirror holds %+v, %v", d, err)
	}
}

// An artifact pulled from the mirror itself is not pushed back.
func TestWriteThroughSkipsWhatCameFromTheMirror(t *testing.T) {
	t.Parallel()
	src, mirror, px := mirrorWorld(t)
	p := pulltest.Pack(t, "grep", "1.0.0", 403)
	pulltest.Push(t, src, grep, "1.0.0", "any", p)
	pulltest.Push(t, mirror, grep, "1.0.0", "any", p)
	pulltest.Push(t, mirror, pulltest.Seed, "1.0.0", "any", pulltest.Pack(t, "seed", "1.0.0", 413))
	w := pulltest.NewWorld(t)
	uploads := px.Requests("/v2/murmur/acme/grep/blobs/uploads/")
	pl := mirroring(w, mirror, mirror, src)
	pl.Limits.Jobs = 1 // the second artifact's pull record comes after the records were read
	both := w.MustPull(pl, pulltest.Req(grep, "1.0.0"), pulltest.Req(pulltest.Seed, "1.0.0"))
	for _, r := range both {
		if r.Origin != mirror.String() || r.Mirror != nil {
			t.Fatalf("result %+v", r)
		}
	}
	if n := px.Requests("/v2/murmur/acme/grep/blobs/uploads/") - uploads; n != 0 {
		t.Fatalf("the pull pushed to the mirror it pulled from (%d upload requests)", n)
	}
	// A cache hit of it later knows from the records that the mirror has it.
	res := w.MustPull(mirroring(w, mirror, src), pulltest.Req(grep, "1.0.0"))[0]
	if !res.CacheHit || res.Mirror != nil {
		t.Fatalf("result %+v", res)
	}
}

// A mirror that fails is a warning, and the next pull tries again; with MirrorRequired it fails
// the command, after the artifact is pinned here.
func TestWriteThroughFailure(t *testing.T) {
	t.Parallel()
	src := pulltest.LayoutStore(t)
	p := pulltest.Pack(t, "grep", "1.0.0", 404)
	pulltest.Push(t, src, grep, "1.0.0", "any", p)
	dead := pulltest.OpenStore(t, "oci://127.0.0.1:1/murmur", ocistore.Options{Retries: -1, Timeout: time.Second})
	w := pulltest.NewWorld(t)
	res := w.MustPull(mirroring(w, dead, src), pulltest.Req(grep, "1.0.0"))[0]
	if res.Mirror == nil || res.Mirror.Pushed || res.Mirror.Error == "" || res.Mirror.Token == "" || len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "the next pull or warm tries again") {
		t.Fatalf("result %+v (mirror %+v)", res, res.Mirror)
	}
	res = w.MustPull(mirroring(w, dead, src), pulltest.Req(grep, "1.0.0"))[0]
	if !res.CacheHit || res.Mirror == nil || res.Mirror.Pushed {
		t.Fatalf("the next pull did not try again: %+v", res)
	}
	pl := mirroring(w, dead, src)
	pl.Mirror.Required = true
	res2, err := w.Pull(pl, pulltest.Req(grep, "1.0.0"))
	errtest.WantToken(t, err, errs.Network, dead.String(), "mirror_required", "pinned")
	if res2[0].Digest != p.Digest().String() || w.ReadLock().Find("acme/grep") == nil {
		t.Fatalf("result %+v; lock %+v", res2[0], w.ReadLock())
	}
}

// An offline pull pushes nothing.
func TestWriteThroughOffline(t *testing.T) {
	t.Parallel()
	src, mirror, px := mirrorWorld(t)
	p := pulltest.Pack(t, "grep", "1.0.0", 405)
	pulltest.Push(t, src, grep, "1.0.0", "any", p)
	w := pulltest.NewWorld(t)
	w.MustPull(w.Puller(src), pulltest.Req(grep, "1.0.0"))
	pl := mirroring(w, mirror, src)
	pl.Offline = true
	before := px.Requests("")
	res := w.MustPull(pl, pulltest.Req(grep, "1.0.0"))[0]
	if res.Mirror != nil || px.Requests("") != before {
		t.Fatalf("an offline pull wrote through: %+v", res)
	}
}
