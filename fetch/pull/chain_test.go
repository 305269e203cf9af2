package pull_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/fetch/proxytest"
	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/internal/slowdown"
)

var hola = ref.Name{Scope: "acme", Name: "hola"}

// chainWorld is the chain: a silent store, one that answers 503, one that serves wrong
// bytes, and a good one, each holding acme/grep, acme/seed and acme/hola.
type chainWorld struct {
	silent, unavailable, wrong, good store.Store
	silentProxy                      *proxytest.Proxy
	unavailableReg                   *registrytest.Faulty
	goodProxy                        *proxytest.Proxy
	packs                            map[ref.Name]pulltest.Packed
}

func newChainWorld(t *testing.T) *chainWorld {
	t.Helper()
	// The silent store can only time out, so its timeout may be short; the stores that answer
	// get one that a loaded machine's pauses can't reach (TestStoreHealthMarksDownMidRun
	// waits it out once, when the good store goes silent).
	silentOpt := ocistore.Options{Timeout: 300 * time.Millisecond, Retries: 1}
	opt := ocistore.Options{Timeout: slowdown.Scale(2 * time.Second), Retries: 1}
	c := &chainWorld{packs: map[ref.Name]pulltest.Packed{}}
	empty := registrytest.StartFaulty(t)
	c.silentProxy = proxytest.Start(t, empty.Addr(), proxytest.Options{Fault: proxytest.Silence})
	c.silent = pulltest.OpenStore(t, "oci://"+c.silentProxy.Addr()+"/murmur", silentOpt)
	c.unavailableReg = registrytest.StartFaulty(t)
	c.unavailable = pulltest.OpenStore(t, pulltest.FaultyAddr(c.unavailableReg), opt)
	wrongReg := registrytest.StartFaulty(t)
	c.wrong = pulltest.OpenStore(t, pulltest.FaultyAddr(wrongReg), opt)
	goodReg := registrytest.StartFaulty(t)
	c.goodProxy = proxytest.Start(t, goodReg.Addr(), proxytest.Options{})
	c.good = pulltest.OpenStore(t, "oci://"+c.goodProxy.Addr()+"/murmur", opt)
	for i, n := range []ref.Name{grep, pulltest.Seed, hola} {
		p := pulltest.Pack(t, n.Name, "1.0.0", uint64(300+i))
		c.packs[n] = p
		for _, st := range []store.Store{c.unavailable, c.wrong, c.good} {
			pulltest.Push(t, st, n, "1.0.0", "any", p)
		}
	}
	c.unavailableReg.Arm(registrytest.Always(http.StatusServiceUnavailable).Serve)
	wrongReg.Arm(func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		if !registrytest.IsBlob(r) {
			next.ServeHTTP(w, r)
			return
		}
		for _, p := range c.packs {
			if strings.HasSuffix(r.URL.Path, p.Digest().String()) {
				bad := bytes.Clone(p.Zip)
				bad[len(bad)/2] ^= 1
				w.Write(bad)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
	return c
}

func (c *chainWorld) stores() []store.Store {
	return []store.Store{c.silent, c.unavailable, c.wrong, c.good}
}

func allReqs() []pull.Request {
	return []pull.Request{pulltest.Req(grep, "1.0.0"), pulltest.Req(pulltest.Seed, "1.0.0"), pulltest.Req(hola, "1.0.0")}
}

// With fallback: any-error everywhere, the pull falls through to the good store; the silent
// store costs one timeout in the whole run, the 503 one its retries once, and the wrong bytes
// are refused with integrity, naming the store that served them.
func TestChainAnyError(t *testing.T) {
	t.Parallel()
	c := newChainWorld(t)
	w := pulltest.NewWorld(t)
	pl := w.Puller(c.stores()...)
	pl.Limits.Jobs = 3
	pl.Chain.Fallbacks = map[string]store.Fallback{}
	for _, st := range c.stores() {
		pl.Chain.Fallbacks[st.String()] = store.FallbackAnyError
	}
	unavailableBefore := c.unavailableReg.Requests()
	res := w.MustPull(pl, allReqs()...)
	for _, r := range res {
		n, _ := ref.ParseName(r.Name)
		if r.Origin != c.good.String() || r.Digest != c.packs[n].Digest().String() {
			t.Fatalf("result %+v", r)
		}
		if len(r.Skipped) != 3 {
			t.Fatalf("%s skipped %+v, want the three stores before the good one", r.Name, r.Skipped)
		}
		for i, want := range []struct {
			st  store.Store
			tok errs.Token
		}{{c.silent, errs.Network}, {c.unavailable, errs.Network}, {c.wrong, errs.Integrity}} {
			if r.Skipped[i].Place != want.st.String() || r.Skipped[i].Token != string(want.tok) {
				t.Errorf("%s: skipped[%d] = %+v, want %s with %s", r.Name, i, r.Skipped[i], want.st, want.tok)
			}
		}
		if !strings.Contains(r.Skipped[2].Reason, c.wrong.String()) {
			t.Errorf("the integrity refusal does not name the store: %q", r.Skipped[2].Reason)
		}
	}
	if n := c.silentProxy.Requests(""); n != 1 {
		t.Errorf("the silent store got %d requests in a run of 3 artifacts, want 1", n)
	}
	// One ping, then the three manifests at once, each with its retry: none waits for another's
	// answer, and nothing more is asked once the first failure marked the store down.
	if n := c.unavailableReg.Requests() - unavailableBefore; n > 7 {
		t.Errorf("the 503 store got %d requests in a run of 3 artifacts, want at most 7", n)
	}
	rec := lastRecord(w)
	if len(rec.Skipped) != 3 || rec.Skipped[2].Token != string(errs.Integrity) {
		t.Errorf("record skipped %+v", rec.Skipped)
	}
}

// With the default fallback, a 503 stops the chain: the good store after it is not asked, and
// the error says how to let it fall through.
func TestChainNotFoundStopsAtAFailure(t *testing.T) {
	t.Parallel()
	c := newChainWorld(t)
	w := pulltest.NewWorld(t)
	before := w.State()
	goodBefore := c.goodProxy.Requests("")
	_, err := w.Pull(w.Puller(c.unavailable, c.good), pulltest.Req(grep, "1.0.0"))
	errtest.WantToken(t, err, errs.Network, c.unavailable.String(), "503", "fallback: not-found", "any-error", "so the place after it was not asked")
	if n := c.goodProxy.Requests("") - goodBefore; n != 0 {
		t.Errorf("the store after a failed one got %d requests", n)
	}
	w.AssertUnchanged(before)
}

// Wrong bytes stop a not-found chain too, with integrity.
func TestChainNotFoundStopsAtWrongBytes(t *testing.T) {
	t.Parallel()
	c := newChainWorld(t)
	w := pulltest.NewWorld(t)
	_, err := w.Pull(w.Puller(c.wrong, c.good), pulltest.Req(grep, "1.0.0"))
	errtest.WantToken(t, err, errs.Integrity, c.wrong.String())
}

// Not found falls through with either fallback, and the skip says so.
func TestChainNotFoundFallsThrough(t *testing.T) {
	t.Parallel()
	c := newChainWorld(t)
	w := pulltest.NewWorld(t)
	empty := pulltest.OpenStore(t, pulltest.FaultyAddr(registrytest.StartFaulty(t)), ocistore.Options{})
	res := w.MustPull(w.Puller(empty, c.good), pulltest.Req(grep, "1.0.0"))[0]
	if res.Origin != c.good.String() || len(res.Skipped) != 1 || res.Skipped[0].Token != string(errs.NotFound) || res.Skipped[0].Place != empty.String() {
		t.Fatalf("result %+v", res)
	}
}

// A pinned pull takes the pinned bytes from any store in the chain, and a mirror that serves
// other bytes under the pinned name is refused as any store is.
func TestChainPinnedDigestFromAMirror(t *testing.T) {
	t.Parallel()
	c := newChainWorld(t)
	w := pulltest.NewWorld(t)
	w.MustPull(w.Puller(c.good), pulltest.Req(grep, "1.0.0"))
	w2 := pulltest.NewWorld(t)
	w2.Proj = w.Proj // the same project and lock, another machine's CAS
	pl := w2.Puller(c.wrong, c.good)
	pl.Chain.Fallbacks = map[string]store.Fallback{c.wrong.String(): store.FallbackAnyError}
	res := w2.MustPull(pl, pulltest.Req(grep, "1.0.0"))[0]
	if res.Origin != c.good.String() || res.Digest != c.packs[grep].Digest().String() || res.Skipped[0].Token != string(errs.Integrity) {
		t.Fatalf("result %+v", res)
	}
}

// A store healthy at its first request is not asked to prove it again; a failure mid-run marks
// it down for the rest of the run.
func TestStoreHealthMarksDownMidRun(t *testing.T) {
	t.Parallel()
	c := newChainWorld(t)
	w := pulltest.NewWorld(t)
	pl := w.Puller(c.good)
	pl.Limits.Jobs, pl.Limits.MetaJobs = 1, 1
	w.MustPull(pl, pulltest.Req(grep, "1.0.0"))
	c.goodProxy.Set(proxytest.Options{Fault: proxytest.Silence})
	before := c.goodProxy.Requests("")
	res, err := w.Pull(pl, pulltest.Req(pulltest.Seed, "1.0.0"), pulltest.Req(hola, "1.0.0"))
	errtest.WantToken(t, err, errs.Network)
	if n := c.goodProxy.Requests("") - before; n != 1 {
		t.Errorf("a store that went silent got %d requests for 2 artifacts, want 1", n)
	}
	// The two resolve in either order; the second to ask is the one skipped.
	if strings.Contains(res[0].Error, "failed earlier in this run") == strings.Contains(res[1].Error, "failed earlier in this run") {
		t.Errorf("not exactly one artifact's error says the store was skipped:\n%s\n%s", res[0].Error, res[1].Error)
	}
}

func TestParseFallback(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"not-found", "any-error"} {
		if f, err := store.ParseFallback(s); err != nil || string(f) != s {
			t.Errorf("%s: %v %v", s, f, err)
		}
	}
	if _, err := store.ParseFallback("sometimes"); errs.TokenOf(err) != errs.Usage {
		t.Errorf("sometimes: %v", err)
	}
}

// A pinned pull from a store that does not answer costs one timeout: the blob is not asked for
// after the tag went unanswered.
func TestChainPinnedSilentStoreCostsOneTimeout(t *testing.T) {
	t.Parallel()
	c := newChainWorld(t)
	w := pulltest.NewWorld(t)
	w.MustPull(w.Puller(c.good), pulltest.Req(grep, "1.0.0"))
	w2 := pulltest.NewWorld(t)
	w2.Proj = w.Proj
	_, err := w2.Pull(w2.Puller(c.silent), pulltest.Req(grep, "1.0.0"))
	errtest.WantToken(t, err, errs.Network, c.silent.String())
	if n := c.silentProxy.Requests(""); n != 1 {
		t.Errorf("a pinned pull asked a silent store %d times, want 1", n)
	}
}
