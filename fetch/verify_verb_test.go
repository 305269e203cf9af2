package fetch_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch"
	"github.com/murmur-nexus/mur/fetch/config"
	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	fstore "github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/fetch/verify"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/lock"
)

// verifyWorld is a world whose project pulled acme/grep and acme/cat from an OCI layout store,
// verified through the verb.
type verifyWorld struct {
	*world
	layout  fstore.Store
	digests map[string]digest.Digest // by artifact name
}

func newVerifyWorld(t *testing.T) *verifyWorld {
	t.Helper()
	w := &verifyWorld{world: newWorld(t)}
	w.layout, w.digests = w.PulledPair()
	return w
}

func (w *verifyWorld) input(t *testing.T) fetch.VerifyInput {
	t.Helper()
	return fetch.VerifyInput{Project: w.Proj, Lock: w.ReadLock(), CAS: w.CAS}
}

func (w *verifyWorld) run(t *testing.T, in fetch.VerifyInput) *fetch.VerifyReport {
	t.Helper()
	rep, err := fetch.Verify(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// blobProblems keeps the blob problems of rep.
func blobProblems(rep *fetch.VerifyReport) []verify.Problem {
	return slices.DeleteFunc(slices.Clone(rep.Problems), func(p verify.Problem) bool { return p.Kind != "blob" })
}

// A repair that can reach no store or source says so, names --store, and the verdict does not
// send the user back to --repair.
func TestRepairWithNothingToAsk(t *testing.T) {
	w := newVerifyWorld(t)
	d := w.digests["acme/grep"]
	os.Remove(w.CAS.Path(d))
	in := w.input(t)
	in.Repair = fetch.NewPuller(&pull.Puller{CAS: w.CAS})
	rep := w.run(t, in)
	blobs := blobProblems(rep)
	if len(blobs) != 1 || blobs[0].Repaired || !strings.Contains(blobs[0].Problem, "not repaired") || !strings.Contains(blobs[0].Problem, "--store") {
		t.Fatalf("a repair with no store: %+v", rep.Problems)
	}
	err := rep.Err(true)
	if err == nil || strings.Contains(err.Error(), "run 'mur verify --repair'") || !strings.Contains(err.Error(), "could not be repaired") {
		t.Fatalf("the verdict after a failed repair: %v", err)
	}
	if err := rep.Err(false); err == nil || !strings.Contains(err.Error(), "--repair") {
		t.Fatalf("the verdict without --repair: %v", err)
	}
	// Offline, the same, with the network named.
	in.Repair = fetch.NewPuller(&pull.Puller{CAS: w.CAS, Stores: []fstore.Store{pulltest.Networked(w.layout)}, Offline: true})
	if blobs := blobProblems(w.run(t, in)); len(blobs) != 1 || blobs[0].Repaired || !strings.Contains(blobs[0].Problem, "network") {
		t.Fatalf("an offline repair: %+v", blobs)
	}
}

// verify --repair fetches through the same assembly as pull: what it brings in is written through
// to the mirror, and it fetches over the connections it was given.
func TestVerifyRepairWritesThroughTheWorkspacePuller(t *testing.T) {
	w := newVerifyWorld(t)
	d := w.digests["acme/grep"]
	if err := os.Remove(w.CAS.Path(d)); err != nil {
		t.Fatal(err)
	}
	rec := newOpenRecorder(t)
	rec.stores["oci://team.example/murmur"] = w.layout
	ws := &fetch.Workspace{Project: w.Proj, Config: &config.Config{Stores: []string{"oci://team.example/murmur"}, Mirror: "oci://mirror.example/murmur"}}
	repair, err := ws.Puller(rec.options(fetch.PullerOptions{CAS: w.CAS, Connections: 3}))
	if err != nil {
		t.Fatal(err)
	}
	in := w.input(t)
	in.Repair = repair
	rep := w.run(t, in)
	if rep.Unrepaired() != 0 || rep.RepairedCount() != 1 {
		t.Fatalf("repair: %+v", rep.Problems)
	}
	got, err := rec.stores["oci://mirror.example/murmur"].Resolve(context.Background(), grep, "1.0.0", "any")
	if err != nil || got.Digest != d {
		t.Fatalf("the mirror holds %+v, %v; want the repaired blob written through", got, err)
	}
	if in.Repair.Pipeline().Limits.Connections != 3 {
		t.Fatalf("the repair fetched over %d connections, want 3", in.Repair.Pipeline().Limits.Connections)
	}
}

// verify --platform P --repair pulls the blob pinned for P, though the Puller it is handed is this
// machine's: the verb sets the repair to the platform it verifies.
func TestVerifyRepairsThePlatformItVerifies(t *testing.T) {
	other := "darwin-aarch64"
	if ref.HostPlatform() == other {
		other = "linux-x86_64"
	}
	w := newVerifyWorld(t)
	n := ref.Name{Scope: "acme", Name: "multi"}
	p := pulltest.Pack(t, "multi", "2.0.0", 761)
	pulltest.Push(t, w.layout, n, "2.0.0", other, p)
	err := lock.Update(context.Background(), w.Proj.LockPath(), func(l *lock.Lock) error {
		return l.Upsert(n.String(), "2.0.0", other, p.Digest().Encoded(), "", false)
	})
	if err != nil {
		t.Fatal(err)
	}
	in := w.input(t)
	in.Platform = other
	in.Repair = fetch.NewPuller(&pull.Puller{CAS: w.CAS, Stores: []fstore.Store{w.layout}})
	rep := w.run(t, in)
	if blobs := blobProblems(rep); len(blobs) != 1 || !blobs[0].Repaired || !w.CAS.Has(p.Digest()) {
		t.Fatalf("--platform %s --repair of its missing blob: %+v", other, rep.Problems)
	}
}

func TestIntegritySummaryNamesWhatFellThroughBadBytes(t *testing.T) {
	clean := pull.Result{Name: "acme/a", Skipped: []pull.Skipped{{Place: "oci://x/m", Token: "not-found"}, {Place: "oci://y/m", Token: "network"}}}
	if s := fetch.IntegritySummary([]pull.Result{clean}); s != "" {
		t.Fatalf("a pull that met no bad bytes: %q", s)
	}
	bad := pull.Result{Name: "acme/b", Skipped: []pull.Skipped{{Place: "oci://evil/m", Token: "integrity"}}}
	s := fetch.IntegritySummary([]pull.Result{clean, bad})
	for _, want := range []string{"1 artifact was pulled only after", "oci://evil/m", "acme/b", "integrity check"} {
		if !strings.Contains(s, want) {
			t.Fatalf("summary %q lacks %q", s, want)
		}
	}
}
