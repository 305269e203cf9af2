package pull_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/fetch/pull"
	"github.com/murmur-nexus/mur/fetch/pull/pulltest"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
	"github.com/murmur-nexus/mur/internal/ref"
)

// Offline, "latest" is chosen from the version list cached by the last online "latest", not
// from what was pulled: a version published since is not seen, and a listed version whose blob
// is gone is an error that names it.
func TestOfflineLatestFromCachedList(t *testing.T) {
	t.Parallel()
	st := pulltest.Networked(pulltest.LayoutStore(t)) // offline means this store is out of reach
	v10, v11, v12 := pulltest.Pack(t, "grep", "1.0.0", 1), pulltest.Pack(t, "grep", "1.1.0", 2), pulltest.Pack(t, "grep", "1.2.0", 3)
	pulltest.Push(t, st, grep, "1.0.0", "any", v10)
	pulltest.Push(t, st, grep, "1.1.0", "any", v11)
	w := pulltest.NewWorld(t)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration, offline bool) *pull.Puller {
		pl := w.Puller(st)
		pl.Now = func() time.Time { return t0.Add(d) }
		pl.Offline = offline
		return pl
	}

	// Nothing cached: an explicit version pulled online leaves no list, so offline fails as ever.
	w.MustPull(at(0, false), pulltest.Req(grep, "1.0.0"))
	os.Remove(w.Proj.LockPath())
	_, err := w.Pull(at(0, true), pulltest.Req(grep, ref.Latest))
	errtest.WantToken(t, err, errs.Offline, "acme/grep@latest", "not in the cache")

	res := w.MustPull(at(0, false), pulltest.Req(grep, ref.Latest))
	if res[0].Version != "1.1.0" || res[0].ResolvedOffline {
		t.Fatalf("online latest: %+v", res[0])
	}
	recs, err := w.CAS.Records("")
	if err != nil {
		t.Fatal(err)
	}
	last := recs[len(recs)-1]
	if last.VersionList == "" || !w.CAS.Has(last.VersionList) {
		t.Fatalf("online latest kept no version list: %+v", last)
	}

	// Published afterwards, never pulled: offline, the cached list counts, and it says its age.
	pulltest.Push(t, st, grep, "1.2.0", "any", v12)
	os.Remove(w.Proj.LockPath())
	res = w.MustPull(at(3*24*time.Hour+time.Hour, true), pulltest.Req(grep, ref.Latest))
	if res[0].Version != "1.1.0" || res[0].Digest != v11.Digest().String() || !res[0].ResolvedOffline {
		t.Fatalf("offline latest: %+v", res[0])
	}
	want := `stale-index: acme/grep: "latest" resolved to 1.1.0 from the tag list of acme/grep at ` + st.String() + ` cached 3 days ago (2026-03-01T12:00:00Z); run 'mur pull' online to check`
	if len(res[0].Warnings) != 1 || res[0].Warnings[0] != want {
		t.Fatalf("warnings %q, want %q", res[0].Warnings, want)
	}
	recs, _ = w.CAS.Records("")
	if !recs[len(recs)-1].ResolvedOffline {
		t.Errorf("the offline pull's record does not say resolved_offline: %+v", recs[len(recs)-1])
	}

	// The list names 1.1.0; its blob is gone: a clear offline error, not an older version.
	os.Remove(w.Proj.LockPath())
	if err := os.Remove(w.CAS.Path(v11.Digest())); err != nil {
		t.Fatal(err)
	}
	_, err = w.Pull(at(time.Hour, true), pulltest.Req(grep, ref.Latest))
	errtest.WantToken(t, err, errs.Offline, `"latest" is 1.1.0 in the tag list of acme/grep`, "acme/grep@1.1.0 is not in the cache")
	if strings.Contains(err.Error(), "1.0.0") {
		t.Errorf("fell back to an older version: %v", err)
	}
}
