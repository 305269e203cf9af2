package sigstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/fetch/provenance"
	"github.com/murmur-nexus/mur/fetch/provenance/sigstore/provenancetest"
	"github.com/murmur-nexus/mur/fetch/provenance/sigstore/tuftest"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
)

// tufWorld is a home's trust folder whose two instances refresh from local TUF repositories:
// public-good's serves the root mur embeds, GitHub's the root of a test CA.
type tufWorld struct {
	cache    provenance.RootsCache
	pg, gh   *tuftest.Repo
	ghDir    string
	ca       *provenancetest.CA
	rootsDir string
}

func newTUFWorld(t *testing.T) *tufWorld {
	t.Helper()
	w := &tufWorld{ca: provenancetest.NewCA(t, "GitHub, Inc."), rootsDir: t.TempDir()}
	w.pg = tuftest.New(t, publicGoodRoot)
	w.gh = tuftest.New(t, w.ca.TrustedRootJSON(t))
	dir := filepath.Join(t.TempDir(), "trust")
	w.ghDir = filepath.Join(dir, provenance.InstanceGitHub)
	w.cache = provenance.RootsCache{Dir: dir, Repos: []provenance.TUFRepo{
		{Instance: provenance.InstancePublicGood, URL: w.pg.URL(), Root: w.firstRoot(t, "pg", w.pg)},
		{Instance: provenance.InstanceGitHub, URL: w.gh.URL(), Root: w.firstRoot(t, "gh", w.gh)},
	}}
	return w
}

func (w *tufWorld) firstRoot(t *testing.T, name string, r *tuftest.Repo) string {
	p := filepath.Join(w.rootsDir, name+".root.json")
	if err := os.WriteFile(p, r.FirstRoot(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func (w *tufWorld) refresh(t *testing.T) ([]provenance.RootStatus, error) {
	t.Helper()
	return RefreshRoots(t.Context(), &w.cache, time.Minute)
}

func status(t *testing.T, st []provenance.RootStatus, instance string) provenance.RootStatus {
	t.Helper()
	for _, s := range st {
		if s.Instance == instance {
			return s
		}
	}
	t.Fatalf("no status for %s in %+v", instance, st)
	return provenance.RootStatus{}
}

// snapshotDir is every file under dir but the refresh's own bookkeeping, by path, hashed.
func snapshotDir(t *testing.T, dir string) map[string][32]byte {
	t.Helper()
	out := map[string][32]byte{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == "state.json" || d.Name() == "lock" {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[p] = sha256.Sum256(data)
		return nil
	})
	return out
}

// A new trusted_root.json published in the repository is picked up by the next refresh, which
// says what changed; a refresh with nothing new says unchanged.
func TestRefreshPicksUpARotation(t *testing.T) {
	w := newTUFWorld(t)
	st, err := w.refresh(t)
	if err != nil {
		t.Fatal(err)
	}
	gh, pg := status(t, st, provenance.InstanceGitHub), status(t, st, provenance.InstancePublicGood)
	if gh.Source != "tuf" || !gh.Changed || gh.Was != summary(githubRoot) || gh.Summary != summary(w.ca.TrustedRootJSON(t)) || gh.Fetched.IsZero() {
		t.Fatalf("github after the first refresh: %+v", gh)
	}
	if pg.Source != "tuf" || pg.Changed || pg.Summary != summary(publicGoodRoot) {
		t.Fatalf("public-good serves the embedded root, so nothing changed: %+v", pg)
	}
	if got, _ := os.ReadFile(w.cachedRoot(t)); !sameJSON(got, w.ca.TrustedRootJSON(t)) {
		t.Fatal("the cache does not hold the root the repository published")
	}

	rotated := provenancetest.NewCA(t, "GitHub, Inc.")
	w.gh.Publish(rotated.TrustedRootJSON(t))
	st, err = w.refresh(t)
	if err != nil {
		t.Fatal(err)
	}
	if gh := status(t, st, provenance.InstanceGitHub); !gh.Changed || gh.Source != "tuf" {
		t.Fatalf("github after a rotation: %+v", gh)
	}
	if got, _ := os.ReadFile(w.cachedRoot(t)); !sameJSON(got, rotated.TrustedRootJSON(t)) {
		t.Fatal("the cache does not hold the rotated root")
	}
	st, err = w.refresh(t)
	if err != nil || status(t, st, provenance.InstanceGitHub).Changed {
		t.Fatalf("a refresh with nothing new: %+v, %v", st, err)
	}
	shown, err := ShowRoots(&w.cache)
	if err != nil || status(t, shown, provenance.InstanceGitHub).Source != "cache" || status(t, shown, provenance.InstanceGitHub).Summary != summary(rotated.TrustedRootJSON(t)) {
		t.Fatalf("show after refresh: %+v, %v", shown, err)
	}
}

// Expired timestamp or snapshot metadata, and a target whose bytes are not the ones the signed
// metadata names, are refused: the refresh fails as integrity and the cache keeps what it had.
func TestRefreshRefusesExpiredAndTamperedMetadata(t *testing.T) {
	type attack struct {
		do   func(w *tufWorld, t *testing.T)
		says string
	}
	for name, a := range map[string]attack{
		"expired timestamp": {func(w *tufWorld, t *testing.T) { w.gh.ExpireTimestamp() }, "timestamp.json is expired"},
		"expired snapshot":  {func(w *tufWorld, t *testing.T) { w.gh.ExpireSnapshot() }, "snapshot.json is expired"},
		"not a trusted root": {func(w *tufWorld, t *testing.T) {
			w.gh.Publish([]byte(`{"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json"}`))
		}, "is not a Sigstore trusted root (the JSON at line 1 has not the mediaType"},
		"a trusted root that does not parse": {func(w *tufWorld, t *testing.T) {
			w.gh.Publish([]byte(`{"mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1", "certificateAuthorities": [{"certChain": {"certificates": [{"rawBytes": "AAAA"}]}}]}`))
		}, "does not parse as a Sigstore trusted root"},
		"tampered target": {func(w *tufWorld, t *testing.T) {
			// The served bytes keep the published length (another CA's root may be a byte longer,
			// which TUF refuses for its length before its hash), so that the hash is what refuses.
			published := provenancetest.NewCA(t, "GitHub, Inc.").TrustedRootJSON(t)
			served := bytes.Clone(published)
			i := bytes.LastIndex(served, []byte(`"rawBytes": "`)) + len(`"rawBytes": "`)
			served[i] ^= 0x01
			w.gh.Tamper(published, served)
		}, "hash verification failed - mismatch for algorithm sha256"},
	} {
		t.Run(name, func(t *testing.T) {
			w := newTUFWorld(t)
			if _, err := w.refresh(t); err != nil {
				t.Fatal(err)
			}
			before := snapshotDir(t, w.ghDir)
			a.do(w, t)
			st, err := w.refresh(t)
			errtest.WantToken(t, err, errs.Integrity, "github's TUF repository", a.says, "keeps the trusted root it had")
			if gh := status(t, st, provenance.InstanceGitHub); gh.Error == "" || gh.Source != "cache" || gh.Changed {
				t.Fatalf("status of a refused refresh: %+v", gh)
			}
			after := snapshotDir(t, w.ghDir)
			if len(after) != len(before) {
				t.Fatalf("the cache changed: %d files before, %d after", len(before), len(after))
			}
			for p, h := range before {
				if after[p] != h {
					t.Fatalf("%s changed in a refused refresh", p)
				}
			}
		})
	}
}

// Offline, the cache is used as it is, and with no cache the embedded roots; nothing is fetched.
// Online with the repository unreachable, a due refresh fails into one note and the cache is
// still used; the next verify of the day does not try again.
func TestRootsFallBackToTheCacheThenTheEmbedded(t *testing.T) {
	w := newTUFWorld(t)
	bundle := w.ca.Mint(t, provenancetest.Statement(zipDigest.Encoded(), SLSAProvenanceV1), provenancetest.GoodLeaf())
	offline := w.cache
	offline.Offline = true
	r, notes, err := CachedRoots(t.Context(), &offline)
	if err != nil || len(notes) != 0 || !strings.Contains(r.describe(), "github: root this mur embeds") {
		t.Fatalf("offline without a cache: %v, %q, %v", r.describe(), notes, err)
	}
	if _, err := Verify(bundle, zipDigest, acmeExpect(), r); errs.TokenOf(err) != errs.ProvenanceUnverifiable {
		t.Fatalf("the embedded roots took the test CA's bundle: %v", err)
	}
	if _, err := RefreshRoots(t.Context(), &offline, time.Minute); errs.TokenOf(err) != errs.Offline {
		t.Fatalf("an offline refresh: %v", err)
	}
	if w.gh.Requests()+w.pg.Requests() != 0 {
		t.Fatal("offline reached a TUF repository")
	}

	if _, err := w.refresh(t); err != nil {
		t.Fatal(err)
	}
	served := w.gh.Requests()
	r, notes, err = CachedRoots(t.Context(), &offline)
	if err != nil || len(notes) != 0 || !strings.Contains(r.describe(), "github: root TUF delivered on") {
		t.Fatalf("offline with a cache: %v, %q, %v", r.describe(), notes, err)
	}
	if _, err := Verify(bundle, zipDigest, acmeExpect(), r); err != nil {
		t.Fatalf("the cached root does not verify its CA's bundle: %v", err)
	}
	if w.gh.Requests() != served {
		t.Fatal("offline reached the TUF repository")
	}

	// A day later, with the repositories gone: one note each, the cache still used.
	w.gh.Close()
	w.pg.Close()
	age(t, w.cache.Dir, 25*time.Hour)
	r, notes, err = CachedRoots(t.Context(), &w.cache)
	if err != nil || len(notes) != 2 || !strings.Contains(notes[1], "github's TUF repository") || !strings.Contains(notes[1], "can't be reached") ||
		!strings.Contains(notes[1], "checking against the root TUF delivered on") || !strings.Contains(notes[1], "'mur trust refresh' tries again") {
		t.Fatalf("notes of a failed refresh: %q, %v", notes, err)
	}
	if _, err := Verify(bundle, zipDigest, acmeExpect(), r); err != nil {
		t.Fatalf("after a failed refresh the cache is not used: %v", err)
	}
	if _, notes, _ = CachedRoots(t.Context(), &w.cache); len(notes) != 0 {
		t.Fatalf("a second verify of the day tried again: %q", notes)
	}

	// A cache that does not parse is not used: the embedded root is.
	os.WriteFile(w.cachedRoot(t), []byte("{not json"), 0o600)
	if r, _, _ = CachedRoots(t.Context(), &offline); !strings.Contains(r.describe(), "github: root this mur embeds") {
		t.Fatalf("a broken cache: %s", r.describe())
	}
}

// age moves every instance's last refresh attempt back by d.
func age(t *testing.T, dir string, d time.Duration) {
	t.Helper()
	for _, inst := range provenance.Instances {
		p := filepath.Join(dir, inst, "state.json")
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var st cacheState
		if err := json.Unmarshal(data, &st); err != nil {
			t.Fatal(err)
		}
		st.Attempted = st.Attempted.Add(-d)
		data, _ = json.Marshal(st)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// The test: a bundle signed under a rotated key is refused before the refresh and
// verifies after it, through the helper's verify request; and a verify a day later picks up
// a rotation by itself.
func TestRotatedKeyVerifiesAfterRefreshNotBefore(t *testing.T) {
	w := newTUFWorld(t)
	if _, err := w.refresh(t); err != nil {
		t.Fatal(err)
	}
	rotated := provenancetest.NewCA(t, "GitHub, Inc.")
	w.gh.Publish(rotated.TrustedRootJSON(t))
	bundle := rotated.Mint(t, provenancetest.Statement(zipDigest.Encoded(), SLSAProvenanceV1), provenancetest.GoodLeaf())
	verify := func() provenance.Response {
		var l Local // one helper process per command
		return l.answer(t.Context(), provenance.Request{Op: "verify", Bundle: bundle, Digest: zipDigest, Expect: acmeExpect(), Roots: &w.cache})
	}
	if resp := verify(); resp.Token != string(errs.ProvenanceUnverifiable) || resp.Unanchored == "" || !strings.Contains(resp.Msg, "mur trust refresh") {
		t.Fatalf("before the refresh: %+v", resp)
	}
	if resp := rootsAnswer(t.Context(), provenance.Request{Op: "refresh-roots", Roots: &w.cache}); resp.Token != "" || !status(t, resp.Roots, provenance.InstanceGitHub).Changed {
		t.Fatalf("refresh-roots: %+v", resp)
	}
	if resp := verify(); resp.Token != "" || resp.Facts == nil || resp.Facts.OwnerID != 1234567 {
		t.Fatalf("after the refresh: %+v", resp)
	}

	again := provenancetest.NewCA(t, "GitHub, Inc.")
	w.gh.Publish(again.TrustedRootJSON(t))
	bundle = again.Mint(t, provenancetest.Statement(zipDigest.Encoded(), SLSAProvenanceV1), provenancetest.GoodLeaf())
	if resp := verify(); resp.Token == "" {
		t.Fatal("a verify refreshed within the day")
	}
	age(t, w.cache.Dir, 25*time.Hour)
	if resp := verify(); resp.Token != "" || len(resp.Notes) != 0 {
		t.Fatalf("a verify a day later did not refresh by itself: %+v", resp)
	}
}

// Only a bundle with a certificate needs an instance: a keyed bundle, or something that is no
// bundle, never refreshes, so a team registry's pull never waits on Sigstore's TUF repository.
func TestOnlyCertifiedBundlesRefresh(t *testing.T) {
	w := newTUFWorld(t)
	for _, b := range []string{`{"verificationMaterial":{"publicKey":{"hint":"x"}}}`, `{"verificationMaterial":{}}`, `not json`} {
		var l Local
		resp := l.answer(context.Background(), provenance.Request{Op: "verify", Bundle: []byte(b), Digest: zipDigest, Expect: acmeExpect(), Roots: &w.cache})
		if resp.Token == "" || w.gh.Requests()+w.pg.Requests() != 0 {
			t.Fatalf("%s reached the TUF repositories (%d requests): %+v", b, w.gh.Requests()+w.pg.Requests(), resp)
		}
	}
	var l Local
	l.answer(context.Background(), provenance.Request{Op: "verify", Bundle: []byte(`{"verificationMaterial":{"x509CertificateChain":{"certificates":[]}}}`), Digest: zipDigest, Expect: acmeExpect(), Roots: &w.cache})
	if w.gh.Requests() == 0 {
		t.Fatal("a bundle with a certificate chain did not refresh")
	}
}

// A repository replaying older, validly signed metadata is refused: the refresh starts from the
// metadata it verified last time, not from the first root alone.
func TestRefreshRefusesARollback(t *testing.T) {
	w := newTUFWorld(t)
	if _, err := w.refresh(t); err != nil {
		t.Fatal(err)
	}
	w.gh.Publish(provenancetest.NewCA(t, "GitHub, Inc.").TrustedRootJSON(t))
	if _, err := w.refresh(t); err != nil {
		t.Fatal(err)
	}
	before := snapshotDir(t, w.ghDir)
	w.gh.RollBack()
	_, err := w.refresh(t)
	errtest.WantToken(t, err, errs.Integrity, "github's TUF repository", "TUF refuses")
	if after := snapshotDir(t, w.ghDir); len(after) != len(before) {
		t.Fatal("a refused rollback changed the cache")
	}
}

// The cache holds one repository's root: once tuf_repositories names another, it is not used
// until that one has delivered.
func TestCacheOfAnotherRepositoryIsNotUsed(t *testing.T) {
	w := newTUFWorld(t)
	if _, err := w.refresh(t); err != nil {
		t.Fatal(err)
	}
	other := tuftest.New(t, provenancetest.NewCA(t, "GitHub, Inc.").TrustedRootJSON(t))
	w.cache.Repos[1] = provenance.TUFRepo{Instance: provenance.InstanceGitHub, URL: other.URL(), Root: w.firstRoot(t, "other", other)}
	w.cache.Offline = true
	shown, err := ShowRoots(&w.cache)
	if err != nil || status(t, shown, provenance.InstanceGitHub).Source != "embedded" || status(t, shown, provenance.InstancePublicGood).Source != "cache" {
		t.Fatalf("after switching github's repository: %+v, %v", shown, err)
	}
}

// A refresh is due on first use, a day after the last attempt, or an hour after one once the
// metadata it vouched with has expired.
func TestRefreshIsDue(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		st   cacheState
		want bool
	}{
		{cacheState{}, true},
		{cacheState{Attempted: now.Add(-time.Hour)}, false},
		{cacheState{Attempted: now.Add(-25 * time.Hour)}, true},
		{cacheState{Attempted: now.Add(-2 * time.Hour), Expires: now.Add(-time.Minute)}, true},
		{cacheState{Attempted: now.Add(-time.Minute), Expires: now.Add(-time.Minute)}, false},
		{cacheState{Attempted: now.Add(-2 * time.Hour), Expires: now.Add(time.Hour)}, false},
	} {
		if got := c.st.due(now); got != c.want {
			t.Errorf("due(%+v) = %v, want %v", c.st, got, c.want)
		}
	}
}

// A repository that never answers holds a verify only for the refresh's budget, and the bundle is
// then checked against what mur has.
func TestUnansweredRefreshIsBounded(t *testing.T) {
	w := newTUFWorld(t)
	w.pg.Hang()
	w.gh.Hang()
	r, notes, err := CachedRoots(t.Context(), &w.cache)
	if err != nil || len(notes) != 2 || !strings.Contains(notes[0], "can't be reached") || !strings.Contains(notes[0], "root this mur embeds") {
		t.Fatalf("a hanging repository: %q, %v", notes, err)
	}
	if !strings.Contains(r.describe(), "github: root this mur embeds") {
		t.Fatalf("roots after a hanging refresh: %s", r.describe())
	}
}

// Two commands that find a refresh due at once fetch once: the second, holding the lock after
// the first, finds the cache fresh. mur trust refresh fetches whatever the cache says.
func TestRefreshOnUseRechecksUnderTheLock(t *testing.T) {
	w := newTUFWorld(t)
	insts, err := instanceCaches(&w.cache)
	if err != nil {
		t.Fatal(err)
	}
	gh := insts[1]
	if _, err := gh.refresh(t.Context(), false); err != nil {
		t.Fatal(err)
	}
	served := w.gh.Requests()
	killed := filepath.Join(gh.dir, ".refresh-123")
	if err := os.MkdirAll(filepath.Join(killed, "tuf"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := gh.refresh(t.Context(), false); err != nil || w.gh.Requests() != served {
		t.Fatalf("a refresh on use right after another fetched again (%d requests, then %d): %v", served, w.gh.Requests(), err)
	}
	if _, err := gh.refresh(t.Context(), true); err != nil || w.gh.Requests() == served {
		t.Fatalf("a forced refresh did not fetch: %v", err)
	}
	if _, err := os.Stat(killed); !os.IsNotExist(err) {
		t.Fatalf("a killed refresh's staging folder is still there: %v", err)
	}
}

// cachedRoot is the path of the trusted root that github's generation in use holds.
func (w *tufWorld) cachedRoot(t *testing.T) string {
	t.Helper()
	gh := w.github(t)
	gen, err := gh.generation(gh.state())
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(gen, targetName)
}

func (w *tufWorld) github(t *testing.T) instanceCache {
	t.Helper()
	insts, err := instanceCaches(&w.cache)
	if err != nil {
		t.Fatal(err)
	}
	return insts[1]
}
