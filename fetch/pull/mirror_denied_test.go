package pull_test

import (
	"cmp"
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/murmur-nexus/mur/fetch/config"
	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/fetch/publish"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
)

// readOnlyMirror is a registry that, once refused is set, answers every write with status, as a
// pull-through cache (405 UNSUPPORTED) or read-only credentials (403 DENIED) do, and counts the
// writes and reads it is sent.
type readOnlyMirror struct {
	reg        *registrytest.Registry
	refused    atomic.Int32 // the status of a refused write; 0 accepts writes
	allowed    string       // a write whose path holds it is accepted all the same
	headFor    string       // a HEAD whose path holds it is answered headStatus (403 when 0)
	headStatus int
	mu         sync.Mutex
	methods    map[string]int
	heads      int // HEADs answered headStatus
}

func startReadOnlyMirror(t *testing.T) *readOnlyMirror {
	m := &readOnlyMirror{methods: map[string]int{}}
	m.reg = registrytest.StartInProcess(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			m.mu.Lock()
			m.methods[r.Method]++
			m.mu.Unlock()
			if m.headFor != "" && r.Method == http.MethodHead && strings.Contains(r.URL.Path, m.headFor) {
				m.mu.Lock()
				m.heads++
				m.mu.Unlock()
				w.WriteHeader(cmp.Or(m.headStatus, http.StatusForbidden))
				return
			}
			status := int(m.refused.Load())
			if status != 0 && r.Method != http.MethodGet && r.Method != http.MethodHead && (m.allowed == "" || !strings.Contains(r.URL.Path, m.allowed)) {
				code := "UNSUPPORTED"
				if status == http.StatusForbidden {
					code = "DENIED"
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(status)
				w.Write([]byte(`{"errors":[{"code":"` + code + `","message":"refused"}]}`))
				return
			}
			next.ServeHTTP(w, r)
		})
	})
	return m
}

func (m *readOnlyMirror) addr() string { return "oci://" + m.reg.Addr() + "/murmur" }

// writes is how many requests that write (POST, PUT, PATCH, DELETE) the mirror was sent.
func (m *readOnlyMirror) writes() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.methods[http.MethodPost] + m.methods[http.MethodPut] + m.methods[http.MethodPatch] + m.methods[http.MethodDelete]
}

// headCount is how many HEADs were answered headStatus.
func (m *readOnlyMirror) headCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.heads
}

func (m *readOnlyMirror) requests() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, c := range m.methods {
		n += c
	}
	return n
}

// A read-only mirror that already holds the artifact and its provenance bundle (a pull-through
// cache of the store it came from) is looked at, not written: no machine's pull sends it a
// single write, and so none is refused or warned about.
func TestWriteThroughToAReadOnlyMirrorThatHoldsItWritesNothing(t *testing.T) {
	t.Parallel()
	src := pulltest.LayoutStore(t)
	m := startReadOnlyMirror(t)
	mirror := pulltest.OpenStore(t, m.addr(), ocistore.Options{})
	_, item, local, hint, pub := pulltest.SignedGrep(t, 431)
	for _, st := range []store.Store{src, mirror} {
		if err := publish.Push(context.Background(), st, item); err != nil {
			t.Fatal(err)
		}
	}
	m.refused.Store(http.StatusMethodNotAllowed)
	policy := func(string) config.ProvenancePolicy {
		return config.ProvenancePolicy{Mode: config.ProvenanceRequire, Trust: provenance.Trust{Keys: []provenance.TrustedKey{{Hint: hint, PEM: pub}}}}
	}
	for machine := 1; machine <= 2; machine++ {
		w := pulltest.NewWorld(t)
		pl := mirroring(w, mirror, src)
		pl.Provenance.Verifier, pl.Provenance.Policy = local, policy
		var warned []string
		pl.Report.Warn = func(msg string) { warned = append(warned, msg) }
		before := m.writes()
		res := w.MustPull(pl, pulltest.Req(grep, "1.2.0"))[0]
		if res.Provenance == nil || res.Mirror == nil || !res.Mirror.Pushed || len(res.Warnings) != 0 || len(warned) != 0 {
			t.Fatalf("machine %d: %+v (mirror %+v), warned %q", machine, res, res.Mirror, warned)
		}
		if n := m.writes() - before; n != 0 {
			t.Fatalf("machine %d sent the read-only mirror %d writes; it holds everything already", machine, n)
		}
		// The same machine's next pull knows from its records that the mirror has it.
		before = m.requests()
		res = w.MustPull(pl, pulltest.Req(grep, "1.2.0"))[0]
		if !res.CacheHit || res.Mirror != nil || m.requests() != before {
			t.Fatalf("machine %d, second pull: %+v, %d mirror requests", machine, res, m.requests()-before)
		}
	}
}

// A mirror that refuses writes is denied, not a network failure; it is told once per command,
// as one line, and sent one write however many artifacts the command brings in. With
// mirror_required every artifact fails with denied, after it is pinned here.
func TestWriteThroughDeniedOncePerCommand(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusMethodNotAllowed, http.StatusForbidden} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			src := pulltest.LayoutStore(t)
			reqs := pulltest.PushMany(t, src, "tool", 3, 4096, 440)
			m := startReadOnlyMirror(t)
			m.refused.Store(int32(status))
			mirror := pulltest.OpenStore(t, m.addr(), ocistore.Options{})
			w := pulltest.NewWorld(t)
			pl := mirroring(w, mirror, src)
			var warned []string
			var mu sync.Mutex
			pl.Report.Warn = func(msg string) { mu.Lock(); warned = append(warned, msg); mu.Unlock() }
			res := w.MustPull(pl, reqs...)
			if len(warned) != 1 || !strings.Contains(warned[0], mirror.String()) || !strings.Contains(warned[0], "stores:, not mirror:") {
				t.Fatalf("warned %q, want one line naming the mirror", warned)
			}
			notTried := 0
			for _, r := range res {
				if r.Mirror == nil || r.Mirror.Pushed || r.Mirror.Token != string(errs.Denied) || len(r.Warnings) != 0 {
					t.Fatalf("result %+v (mirror %+v)", r, r.Mirror)
				}
				if strings.HasPrefix(r.Mirror.Error, "not tried: the mirror refused an earlier write of this command: ") {
					notTried++
				}
			}
			if notTried != len(reqs)-1 {
				t.Fatalf("%d results say they were not tried, want all but the refused one", notTried)
			}
			if n := m.writes(); n != 1 {
				t.Fatalf("the refusing mirror was sent %d writes for %d artifacts, want 1", n, len(reqs))
			}
			// Not recorded as mirrored: the next command (a Puller of its own) asks again, once.
			pl = mirroring(w, mirror, src)
			pl.Report.Warn = func(msg string) { mu.Lock(); warned = append(warned, msg); mu.Unlock() }
			res = w.MustPull(pl, reqs...)
			if n := m.writes(); n != 2 || len(warned) != 2 || !res[0].CacheHit {
				t.Fatalf("the next pull: %d writes in all, warned %q", n, warned)
			}

			w2 := pulltest.NewWorld(t)
			pl2 := mirroring(w2, mirror, src)
			pl2.Mirror.Required = true
			warned = nil
			pl2.Report.Warn = func(msg string) { mu.Lock(); warned = append(warned, msg); mu.Unlock() }
			res, err := w2.Pull(pl2, reqs...)
			errtest.WantToken(t, err, errs.Denied, mirror.String(), "mirror_required", "pinned")
			for _, r := range res {
				if errs.TokenOf(r.Err) != errs.Denied {
					t.Errorf("%s: %v, want denied", r.Name, r.Err)
				}
			}
			if len(warned) != 0 || w2.ReadLock().Find(reqs[0].Name.String()) == nil {
				t.Fatalf("warned %q; lock %+v", warned, w2.ReadLock())
			}
		})
	}
}

// A mirror that took a write and refuses later ones (credentials that may push to some
// repositories only) is told once too, across the Pulls of one command (warm's platforms).
func TestWriteThroughRefusedAfterAnAcceptedWrite(t *testing.T) {
	t.Parallel()
	src := pulltest.LayoutStore(t)
	reqs := pulltest.PushMany(t, src, "tool", 3, 4096, 460)
	m := startReadOnlyMirror(t)
	m.allowed = "/acme/tool0/"
	m.refused.Store(http.StatusForbidden)
	mirror := pulltest.OpenStore(t, m.addr(), ocistore.Options{})
	w := pulltest.NewWorld(t)
	pl := mirroring(w, mirror, src)
	pl.InitHealth() // one command's record, shared by its Pulls
	var warned []string
	var mu sync.Mutex
	pl.Report.Warn = func(msg string) { mu.Lock(); warned = append(warned, msg); mu.Unlock() }
	if r := w.MustPull(pl, reqs[0])[0]; r.Mirror == nil || !r.Mirror.Pushed {
		t.Fatalf("the allowed write: %+v", r.Mirror)
	}
	for _, r := range w.MustPull(pl, reqs[1:]...) {
		if r.Mirror == nil || r.Mirror.Token != string(errs.Denied) || len(r.Warnings) != 0 {
			t.Fatalf("result %+v (mirror %+v)", r, r.Mirror)
		}
	}
	if len(warned) != 1 {
		t.Fatalf("warned %q; want one line for both refusals", warned)
	}
}

// A bundle whose presence can't be learned is not written blind: the look's failure is the
// write-through's.
func TestWriteThroughBundleLookFails(t *testing.T) {
	t.Parallel()
	src := pulltest.LayoutStore(t)
	m := startReadOnlyMirror(t)
	mirror := pulltest.OpenStore(t, m.addr(), ocistore.Options{})
	p, item, local, hint, pub := pulltest.SignedGrep(t, 470)
	if err := publish.Push(context.Background(), src, item); err != nil {
		t.Fatal(err)
	}
	m.headFor = "/manifests/sha256:"
	w := pulltest.NewWorld(t)
	pl := mirroring(w, mirror, src)
	pl.Provenance.Verifier = local
	pl.Provenance.Policy = func(string) config.ProvenancePolicy {
		return config.ProvenancePolicy{Mode: config.ProvenanceRequire, Trust: provenance.Trust{Keys: []provenance.TrustedKey{{Hint: hint, PEM: pub}}}}
	}
	res := w.MustPull(pl, pulltest.Req(grep, "1.2.0"))[0]
	if res.Mirror == nil || res.Mirror.Pushed || res.Mirror.Token != string(errs.Denied) || !strings.Contains(res.Mirror.Error, "bundle") || strings.Contains(res.Mirror.Error, "push again") {
		t.Fatalf("mirror %+v", res.Mirror)
	}
	if found, err := mirror.(store.BundleFinder).Bundles(context.Background(), grep, "1.2.0", p.Digest()); err != nil || len(found) != 0 {
		t.Fatalf("the bundle was written without a look: %d, %v", len(found), err)
	}
}
