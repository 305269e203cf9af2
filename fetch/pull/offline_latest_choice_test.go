package pull_test

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/cas"
	"github.com/murmur-nexus/mur/fetch/config"
	"github.com/murmur-nexus/mur/fetch/provenance/sigstore"
	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	fstore "github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
	"github.com/murmur-nexus/mur/internal/ref"
)

// offlineWorld is a store out of reach offline and a puller at a time of the test's choosing.
type offlineWorld struct {
	*pulltest.World
	st fstore.Store
	t0 time.Time
}

func newOfflineWorld(t *testing.T) *offlineWorld {
	return &offlineWorld{World: pulltest.NewWorld(t), st: pulltest.Networked(pulltest.LayoutStore(t)), t0: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (w *offlineWorld) at(d time.Duration, offline bool, platform string) *pull.Puller {
	pl := w.Puller(w.st)
	pl.Now = func() time.Time { return w.t0.Add(d) }
	pl.Offline, pl.Platform = offline, platform
	return pl
}

// Offline "latest" takes the listed version's blob for the platform pulled for: a newer pull of
// the same version for another platform does not stand in for it.
func TestOfflineLatestKeepsToItsPlatform(t *testing.T) {
	t.Parallel()
	w := newOfflineWorld(t)
	linux, mac := pulltest.Pack(t, "grep", "1.1.0", 31), pulltest.Pack(t, "grep", "1.1.0", 32)
	pulltest.Push(t, w.st, grep, "1.0.0", "linux-x86_64", pulltest.Pack(t, "grep", "1.0.0", 30))
	pulltest.Push(t, w.st, grep, "1.1.0", "linux-x86_64", linux)
	pulltest.Push(t, w.st, grep, "1.1.0", "darwin-aarch64", mac)

	w.MustPull(w.at(0, false, "linux-x86_64"), pulltest.Req(grep, ref.Latest))
	os.Remove(w.Proj.LockPath())
	w.MustPull(w.at(time.Minute, false, "darwin-aarch64"), pulltest.Req(grep, "1.1.0"))
	os.Remove(w.Proj.LockPath())

	res := w.MustPull(w.at(time.Hour, true, "linux-x86_64"), pulltest.Req(grep, ref.Latest))
	if res[0].Version != "1.1.0" || res[0].Digest != linux.Digest().String() || !res[0].ResolvedOffline {
		t.Fatalf("offline latest for linux-x86_64: %+v; want the linux blob %s", res[0], linux.Digest())
	}

	// With only the other platform's blob held, offline latest has nothing to offer.
	os.Remove(w.Proj.LockPath())
	if err := os.Remove(w.CAS.Path(linux.Digest())); err != nil {
		t.Fatal(err)
	}
	_, err := w.Pull(w.at(2*time.Hour, true, "linux-x86_64"), pulltest.Req(grep, ref.Latest))
	errtest.WantToken(t, err, errs.Offline, "acme/grep@1.1.0 is not in the cache")
}

// A pull of latest that failed after its list was kept (here: its provenance was refused)
// does not make that list the one offline "latest" chooses from.
func TestOfflineLatestSkipsTheListOfAFailedPull(t *testing.T) {
	t.Parallel()
	w := newOfflineWorld(t)
	v11 := pulltest.Pack(t, "grep", "1.1.0", 41)
	pulltest.Push(t, w.st, grep, "1.1.0", "any", v11)
	w.MustPull(w.at(0, false, "linux-x86_64"), pulltest.Req(grep, ref.Latest))
	os.Remove(w.Proj.LockPath())

	pulltest.Push(t, w.st, grep, "1.2.0", "any", pulltest.Pack(t, "grep", "1.2.0", 42))
	refused := w.at(time.Minute, false, "linux-x86_64")
	refused.Provenance.Verifier = &sigstore.Local{}
	refused.Provenance.Policy = func(string) config.ProvenancePolicy {
		return config.ProvenancePolicy{Mode: config.ProvenanceRequire}
	}
	if _, err := w.Pull(refused, pulltest.Req(grep, ref.Latest)); err == nil {
		t.Fatal("a pull under require with no bundle passed")
	}
	recs, err := w.CAS.Records("")
	if err != nil {
		t.Fatal(err)
	}
	if last := recs[len(recs)-1]; last.Outcome != cas.OutcomeFailed || last.VersionList == "" {
		t.Fatalf("the refused pull's record: %+v; want a failed record with its list", last)
	}
	if got := pull.NewestVersionLists(recs)["acme/grep"]; got.Outcome == cas.OutcomeFailed {
		t.Fatalf("newest list is the failed pull's: %+v", got)
	}

	os.Remove(w.Proj.LockPath())
	res := w.MustPull(w.at(time.Hour, true, "linux-x86_64"), pulltest.Req(grep, ref.Latest))
	if res[0].Version != "1.1.0" || res[0].Digest != v11.Digest().String() {
		t.Fatalf("offline latest: %+v; want 1.1.0 from the list of the pull that succeeded", res[0])
	}
}

// The cached list is held to the digest its record names: a list file rewritten in the CAS
// (here to name an older version the cache holds) is refused as integrity, not followed.
func TestOfflineLatestHoldsTheListToItsDigest(t *testing.T) {
	t.Parallel()
	w := newOfflineWorld(t)
	pulltest.Push(t, w.st, grep, "1.0.0", "any", pulltest.Pack(t, "grep", "1.0.0", 51))
	pulltest.Push(t, w.st, grep, "1.1.0", "any", pulltest.Pack(t, "grep", "1.1.0", 52))
	w.MustPull(w.at(0, false, "linux-x86_64"), pulltest.Req(grep, "1.0.0"))
	os.Remove(w.Proj.LockPath())
	w.MustPull(w.at(time.Minute, false, "linux-x86_64"), pulltest.Req(grep, ref.Latest))
	os.Remove(w.Proj.LockPath())
	recs, err := w.CAS.Records("")
	if err != nil {
		t.Fatal(err)
	}
	list := recs[len(recs)-1].VersionList
	raw, err := os.ReadFile(w.CAS.Path(list))
	if err != nil {
		t.Fatal(err)
	}
	var l struct {
		Name     string   `json:"name"`
		From     string   `json:"from"`
		Versions []string `json:"versions"`
	}
	if err := json.Unmarshal(raw, &l); err != nil {
		t.Fatal(err)
	}
	l.Versions = []string{"1.0.0"}
	forged, _ := json.Marshal(l)
	if digest.FromBytes(forged) == list {
		t.Fatal("the forged list is the list")
	}
	if err := os.Remove(w.CAS.Path(list)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(w.CAS.Path(list), forged, 0o444); err != nil {
		t.Fatal(err)
	}
	before := w.State()
	_, err = w.Pull(w.at(time.Hour, true, "linux-x86_64"), pulltest.Req(grep, ref.Latest))
	errtest.WantToken(t, err, errs.Integrity, "version list cached for acme/grep", string(list), "not one mur wrote")
	w.AssertUnchanged(before)
}

// A list its record names but the CAS no longer holds (a gc took it) is no list: offline latest
// fails as it does with none cached, offline, not as damage.
func TestOfflineLatestWithItsListGone(t *testing.T) {
	t.Parallel()
	w := newOfflineWorld(t)
	pulltest.Push(t, w.st, grep, "1.1.0", "any", pulltest.Pack(t, "grep", "1.1.0", 61))
	w.MustPull(w.at(0, false, "linux-x86_64"), pulltest.Req(grep, ref.Latest))
	os.Remove(w.Proj.LockPath())
	recs, err := w.CAS.Records("")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(w.CAS.Path(recs[len(recs)-1].VersionList)); err != nil {
		t.Fatal(err)
	}
	_, err = w.Pull(w.at(time.Hour, true, "linux-x86_64"), pulltest.Req(grep, ref.Latest))
	errtest.WantToken(t, err, errs.Offline, "acme/grep@latest is not in the cache")
}

// When the listed version was pulled more than once with different bytes (served by two stores), offline latest takes the blob of the newest pull, as an online pull would.
func TestOfflineLatestTakesTheNewestPullOfTheVersion(t *testing.T) {
	t.Parallel()
	w := newOfflineWorld(t)
	first, second := pulltest.Pack(t, "grep", "1.1.0", 101), pulltest.Pack(t, "grep", "1.1.0", 102)
	pulltest.Push(t, w.st, grep, "1.1.0", "any", first)
	w.MustPull(w.at(0, false, "linux-x86_64"), pulltest.Req(grep, ref.Latest))
	os.Remove(w.Proj.LockPath())
	// Another store holds other bytes under the same version (a store refuses to replace them).
	elsewhere := pulltest.Networked(pulltest.LayoutStore(t))
	pulltest.Push(t, elsewhere, grep, "1.1.0", "any", second)
	again := w.at(time.Minute, false, "linux-x86_64")
	again.Stores = []fstore.Store{elsewhere}
	if res := w.MustPull(again, pulltest.Req(grep, "1.1.0")); res[0].Digest != second.Digest().String() {
		t.Fatalf("the republished version: %+v", res[0])
	}
	os.Remove(w.Proj.LockPath())
	res := w.MustPull(w.at(time.Hour, true, "linux-x86_64"), pulltest.Req(grep, ref.Latest))
	if res[0].Version != "1.1.0" || res[0].Digest != second.Digest().String() {
		t.Fatalf("offline latest: %+v; want the newest pull's blob %s", res[0], second.Digest())
	}
}
