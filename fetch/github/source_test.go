package github

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/murmur-nexus/mur/fetch/github/githubtest"
	"github.com/murmur-nexus/mur/fetch/store"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
	"github.com/murmur-nexus/mur/internal/ref"
	"github.com/murmur-nexus/mur/internal/slowdown"
	"github.com/murmur-nexus/mur/lock"
)

const (
	owner   = "acme"
	repo    = "murmur-artifacts"
	label   = "github:acme/murmur-artifacts"
	ownerID = 1234567
	repoID  = 7654321
	token   = "ghp_testtoken"
)

// memScratch is a fetch.Scratch in memory.
type memScratch struct{ bytes.Buffer }

func (m *memScratch) ReadAt(p []byte, off int64) (int, error) {
	return bytes.NewReader(m.Bytes()).ReadAt(p, off)
}
func (m *memScratch) Size() int64 { return int64(m.Len()) }
func (m *memScratch) Digest() digest.Digest {
	sum := sha256.Sum256(m.Bytes())
	return digest.NewDigestFromEncoded(digest.SHA256, hex.EncodeToString(sum[:]))
}

var grep = ref.Name{Scope: "acme", Name: "grep"}

func art(version string) githubtest.Artifact {
	return githubtest.Artifact{
		Name: "acme/grep", Version: version, Release: "v" + version,
		Asset: "grep-" + version + ".mur.zip", Data: githubtest.PackArtifact("grep", version),
	}
}

// setup starts a fake with acme/murmur-artifacts publishing grep 1.1.0 and 1.2.0 (the index on
// v1.2.0), and a client with a token, fast retries and a short timeout.
func setup(t *testing.T) (*githubtest.Server, *Client) {
	t.Helper()
	fake := githubtest.New(t)
	fake.AddRepo(owner, repo, ownerID, repoID)
	fake.Publish(owner, repo, "acme", art("1.1.0"), art("1.2.0"))
	return fake, testClient(fake, token)
}

func testClient(fake *githubtest.Server, tok string) *Client {
	c := NewClient(ClientOptions{BaseURL: fake.APIURL(), Token: tok, Retries: 2, Timeout: 5 * time.Second})
	c.backoff = time.Millisecond
	return c
}

func fetchGrep(t *testing.T, c *Client, version string, pin *lock.ScopePin) (store.Sourced, *memScratch, error) {
	t.Helper()
	var scratch memScratch
	got, err := NewSource(c, nil).Fetch(context.Background(), grep, version, "linux-x86_64", pin, &scratch)
	return got, &scratch, err
}

func TestFetchOlderReleaseThroughStorage(t *testing.T) {
	fake, c := setup(t)
	got, scratch, err := fetchGrep(t, c, "1.1.0", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := art("1.1.0")
	if !bytes.Equal(scratch.Bytes(), want.Data) {
		t.Fatal("scratch does not hold the published bytes")
	}
	if got.Name != grep || got.Version != "1.1.0" || got.Platform != "any" || got.Digest.Encoded() != want.SHA256() ||
		got.Size != int64(len(want.Data)) || got.Origin != label || got.Title != want.Asset {
		t.Fatalf("descriptor = %+v", got.Descriptor)
	}
	if got.Release != "v1.1.0" || got.Asset != want.Asset || got.OwnerID != ownerID || got.RepoID != repoID {
		t.Fatalf("sourced = %+v", got)
	}
	if got.NewPin == nil || *got.NewPin != (lock.ScopePin{Source: label, OwnerID: ownerID, RepoID: repoID}) {
		t.Fatalf("NewPin = %+v", got.NewPin)
	}
	if n := fake.Count(githubtest.API, "/repos/acme/murmur-artifacts/releases/tags/v1.1.0"); n != 1 {
		t.Fatalf("release v1.1.0 asked %d times", n)
	}
	if n := fake.Count(githubtest.Storage, "/objects/"); n != 2 { // the index and the payload
		t.Fatalf("storage asked %d times, want 2", n)
	}

	latest, _, err := fetchGrep(t, c, "latest", nil)
	if err != nil || latest.Version != "1.2.0" || latest.Release != "v1.2.0" {
		t.Fatalf("latest = %+v, %v", latest, err)
	}
}

func TestTokenGoesToTheAPIButNeverToStorage(t *testing.T) {
	fake, c := setup(t)
	fake.RequireToken(token)
	if _, _, err := fetchGrep(t, c, "1.2.0", nil); err != nil {
		t.Fatal(err)
	}
	var api, storage, redirects int
	for _, r := range fake.Requests() {
		switch r.Server {
		case githubtest.API:
			api++
			if r.Header.Get("Authorization") != "Bearer "+token {
				t.Errorf("API request %s without the token: %q", r.Path, r.Header.Get("Authorization"))
			}
			if r.Header.Get("X-GitHub-Api-Version") != "2022-11-28" || r.Header.Get("User-Agent") == "" {
				t.Errorf("API request %s headers: %v", r.Path, r.Header)
			}
			accept := r.Header.Get("Accept")
			if strings.Contains(r.Path, "/releases/assets/") {
				if accept != "application/octet-stream" || r.Status != http.StatusFound {
					t.Errorf("asset request Accept %q answered %d", accept, r.Status)
				}
				redirects++
			} else if accept != "application/vnd.github+json" {
				t.Errorf("API request %s Accept %q", r.Path, accept)
			}
		case githubtest.Web:
			t.Errorf("a private repository's asset was asked of the web host: %s", r.Path)
		case githubtest.Storage:
			storage++
			for k, v := range r.Header {
				if strings.EqualFold(k, "Authorization") || strings.Contains(strings.Join(v, " "), token) {
					t.Errorf("storage saw the credential in %s: %v", k, v)
				}
			}
			if r.Status != http.StatusOK {
				t.Errorf("storage answered %d", r.Status)
			}
		}
	}
	if api == 0 || storage != 2 || redirects != 2 {
		t.Fatalf("api %d, storage %d, redirects %d", api, storage, redirects)
	}

	// Without the token the private repository is invisible, as on GitHub.
	_, _, err := fetchGrep(t, testClient(fake, ""), "1.2.0", nil)
	errtest.WantToken(t, err, errs.NotFound, "GITHUB_TOKEN")
}

func TestOwnerPin(t *testing.T) {
	fake, c := setup(t)
	pin := &lock.ScopePin{Source: label, OwnerID: ownerID, RepoID: repoID}
	got, _, err := fetchGrep(t, c, "1.2.0", pin)
	if err != nil {
		t.Fatal(err)
	}
	if got.NewPin != nil || got.OwnerID != ownerID {
		t.Fatalf("with a pin: NewPin %+v, owner %d", got.NewPin, got.OwnerID)
	}

	fake.SetOwnerID(owner, repo, 999)
	fake.ResetRequests()
	_, scratch, err := fetchGrep(t, c, "1.2.0", pin)
	errtest.WantToken(t, err, errs.OwnerChanged, "scope acme", "1234567", "999", "mur lock forget-scope acme")
	if scratch.Size() != 0 || fake.Count(githubtest.Storage, "") != 0 {
		t.Fatalf("an owner change still downloaded: scratch %d bytes, storage %d requests", scratch.Size(), fake.Count(githubtest.Storage, ""))
	}
	// Without a pin the new owner is simply what gets pinned.
	got, _, err = fetchGrep(t, c, "1.2.0", nil)
	if err != nil || got.NewPin == nil || got.NewPin.OwnerID != 999 {
		t.Fatalf("unpinned after transfer: %+v, %v", got.NewPin, err)
	}
}

// flip returns data with one byte of the stored payload changed: same size, other digest.
func flip(data []byte) []byte {
	out := bytes.Clone(data)
	out[len(out)/3] ^= 0xff
	return out
}

func TestReplacedAssetBytes(t *testing.T) {
	for _, keep := range []bool{true, false} {
		name := "advertised digest follows the new bytes"
		if keep {
			name = "advertised digest stays"
		}
		t.Run(name, func(t *testing.T) {
			fake, c := setup(t)
			fake.ReplaceAssetBytes(owner, repo, "v1.2.0", "grep-1.2.0.mur.zip", flip(art("1.2.0").Data), keep)
			_, _, err := fetchGrep(t, c, "1.2.0", nil)
			errtest.WantToken(t, err, errs.Integrity, "acme/grep@1.2.0", "index says "+art("1.2.0").SHA256())
		})
	}
	t.Run("different size", func(t *testing.T) {
		fake, c := setup(t)
		fake.ReplaceAssetBytes(owner, repo, "v1.2.0", "grep-1.2.0.mur.zip", append(art("1.2.0").Data, 0), true)
		_, _, err := fetchGrep(t, c, "1.2.0", nil)
		errtest.WantToken(t, err, errs.Integrity, "longer than")
	})
}

func TestGitHubDigestDisagrees(t *testing.T) {
	fake, c := setup(t)
	wrong := "sha256:" + strings.Repeat("ab", 32)
	a := art("1.2.0")
	fake.Advertise(owner, repo, "v1.2.0", a.Asset, int64(len(a.Data)), wrong)
	_, _, err := fetchGrep(t, c, "1.2.0", nil)
	errtest.WantToken(t, err, errs.Integrity, "GitHub's digest", wrong)

	// Assets GitHub never hashed are still checked against the index alone.
	fake.Advertise(owner, repo, "v1.2.0", a.Asset, int64(len(a.Data)), "")
	if _, _, err := fetchGrep(t, c, "1.2.0", nil); err != nil {
		t.Fatalf("without a GitHub digest: %v", err)
	}
}

func TestAdvertisedSizeDisagrees(t *testing.T) {
	fake, c := setup(t)
	a := art("1.2.0")
	fake.Advertise(owner, repo, "v1.2.0", a.Asset, int64(len(a.Data))+7, "sha256:"+a.SHA256())
	_, scratch, err := fetchGrep(t, c, "1.2.0", nil)
	errtest.WantToken(t, err, errs.Integrity, "GitHub says the asset is")
	if scratch.Size() != 0 {
		t.Fatal("downloaded despite the size mismatch")
	}
}

// publishWithIndex publishes arts and then replaces the index with entries.
func publishWithIndex(t *testing.T, scope string, arts []githubtest.Artifact, entries ...githubtest.IndexEntry) (*githubtest.Server, *Client) {
	t.Helper()
	fake := githubtest.New(t)
	fake.AddRepo(owner, repo, ownerID, repoID)
	fake.Publish(owner, repo, scope, arts...)
	fake.AttachIndex(owner, repo, githubtest.IndexJSON(scope, entries...))
	return fake, testClient(fake, token)
}

func TestIndexEntryLies(t *testing.T) {
	a := art("1.2.0")
	wrongSize := a.Entry()
	wrongSize.Size++
	wrongSHA := a.Entry()
	wrongSHA.SHA256 = strings.Repeat("0", 64)
	missingAsset := a.Entry()
	missingAsset.Asset = "gone.mur.zip"
	missingRelease := a.Entry()
	missingRelease.Release = "v9"

	tests := []struct {
		name     string
		entry    githubtest.IndexEntry
		tok      errs.Token
		mentions []string
	}{
		{"size", wrongSize, errs.Integrity, []string{"index says " + strconv.FormatInt(wrongSize.Size, 10)}},
		{"sha256", wrongSHA, errs.Integrity, []string{"index says " + wrongSHA.SHA256}},
		{"missing asset", missingAsset, errs.IndexMismatch, []string{"gone.mur.zip", "no such asset", "grep-1.2.0.mur.zip"}},
		{"missing release", missingRelease, errs.IndexMismatch, []string{"v9", "no such release"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, c := publishWithIndex(t, "acme", []githubtest.Artifact{a}, tt.entry)
			_, _, err := fetchGrep(t, c, "1.2.0", nil)
			errtest.WantToken(t, err, tt.tok, tt.mentions...)
		})
	}
}

func TestBrokenIndexes(t *testing.T) {
	t.Run("not JSON", func(t *testing.T) {
		fake, c := setup(t)
		fake.AttachIndex(owner, repo, []byte("<html>oops</html>"))
		_, _, err := fetchGrep(t, c, "1.2.0", nil)
		errtest.WantToken(t, err, errs.IndexMismatch, "murmur-index.json on release v1.2.0", "not valid JSON")
	})
	t.Run("another scope", func(t *testing.T) {
		_, c := publishWithIndex(t, "other", []githubtest.Artifact{art("1.2.0")})
		_, _, err := fetchGrep(t, c, "1.2.0", nil)
		errtest.WantToken(t, err, errs.IndexMismatch, `for scope "other", not "acme"`)
	})
	t.Run("no index asset", func(t *testing.T) {
		fake, c := setup(t)
		fake.AddRelease(owner, repo, "v2.0.0", map[string][]byte{"notes.txt": []byte("hi")})
		_, _, err := fetchGrep(t, c, "1.2.0", nil)
		errtest.WantToken(t, err, errs.NotFound, "latest release v2.0.0", "has no murmur-index.json")
	})
	t.Run("no release", func(t *testing.T) {
		fake := githubtest.New(t)
		fake.AddRepo(owner, repo, ownerID, repoID)
		_, _, err := fetchGrep(t, testClient(fake, token), "1.2.0", nil)
		errtest.WantToken(t, err, errs.NotFound, label, "no published release")
	})
	t.Run("no repository", func(t *testing.T) {
		fake := githubtest.New(t)
		_, _, err := fetchGrep(t, testClient(fake, token), "1.2.0", nil)
		errtest.WantToken(t, err, errs.NotFound)
	})
	t.Run("index asset corrupted in storage", func(t *testing.T) {
		fake, c := setup(t)
		idx := githubtest.IndexJSON("acme", art("1.1.0").Entry(), art("1.2.0").Entry())
		fake.ReplaceAssetBytes(owner, repo, "v1.2.0", IndexAssetName, flip(idx), true)
		_, _, err := fetchGrep(t, c, "1.2.0", nil)
		errtest.WantToken(t, err, errs.Integrity, "GitHub's digest")
	})
}

func TestLatestSkipsDraftsAndPrereleases(t *testing.T) {
	fake, c := setup(t)
	fake.AddDraftRelease(owner, repo, "v9-draft", map[string][]byte{IndexAssetName: []byte("x")})
	fake.AddPrerelease(owner, repo, "v9-pre", map[string][]byte{IndexAssetName: []byte("x")})
	ix, err := NewSource(c, nil).Index(context.Background(), "acme")
	if err != nil || len(ix.Artifacts) != 2 {
		t.Fatalf("index = %+v, %v", ix, err)
	}
	if _, err := c.ReleaseByTag(context.Background(), owner, repo, "v9-draft"); !errors.Is(err, errs.NotFound) {
		t.Fatalf("draft release by tag: %v", err)
	}
}

func TestMissingEntries(t *testing.T) {
	linuxOnly := art("2.0.0")
	linuxOnly.Platform = "linux-x86_64"
	odd := art("nightly")
	_, c := publishWithIndex(t, "acme", []githubtest.Artifact{art("1.1.0"), linuxOnly, odd},
		art("1.1.0").Entry(), linuxOnly.Entry(), odd.Entry())
	src := NewSource(c, nil)
	var scratch memScratch
	ctx := context.Background()

	_, err := src.Fetch(ctx, grep, "1.3.0", "linux-x86_64", nil, &scratch)
	errtest.WantToken(t, err, errs.NotFound, "acme/grep@1.3.0", "it lists, newest first: 2.0.0, 1.1.0, nightly;", "release v")
	_, err = src.Fetch(ctx, grep, "v1.1.0", "linux-x86_64", nil, &scratch)
	errtest.WantToken(t, err, errs.NotFound, "acme/grep@v1.1.0", "drop the v: acme/grep@1.1.0")

	_, err = src.Fetch(ctx, grep, "2.0.0", "darwin-aarch64", nil, &scratch)
	errtest.WantToken(t, err, errs.NotFound, "acme/grep@2.0.0", "darwin-aarch64")

	got, err := src.Fetch(ctx, grep, "latest", "darwin-aarch64", nil, &scratch)
	if err != nil || got.Version != "1.1.0" {
		t.Fatalf("latest for darwin: %+v, %v", got.Descriptor, err)
	}
	// What latest chose from, for the CAS to keep: the platform's entries, not linux's 2.0.0.
	if !slices.Contains(got.Versions, "1.1.0") || slices.Contains(got.Versions, "2.0.0") {
		t.Fatalf("latest for darwin listed %q, want 1.1.0 and not 2.0.0", got.Versions)
	}
	if exact, err := src.Resolve(ctx, grep, "1.1.0", "darwin-aarch64", nil); err != nil || exact.Versions != nil {
		t.Fatalf("an exact version listed %q, %v; want no list", exact.Versions, err)
	}

	_, err = src.Fetch(ctx, ref.Name{Scope: "acme", Name: "sed"}, "latest", "any", nil, &memScratch{})
	errtest.WantToken(t, err, errs.NotFound, "no version of acme/sed")
}

func TestNonSemverLatestAsksForAVersion(t *testing.T) {
	odd := art("nightly")
	_, c := publishWithIndex(t, "acme", []githubtest.Artifact{odd}, odd.Entry())
	_, _, err := fetchGrep(t, c, "latest", nil)
	errtest.WantToken(t, err, errs.Usage, "acme/grep@nightly")
}

func TestRetriesTransientFailures(t *testing.T) {
	fake, c := setup(t)
	fake.FailNext(2, http.StatusServiceUnavailable)
	if _, _, err := fetchGrep(t, c, "1.2.0", nil); err != nil {
		t.Fatalf("two 503s then success: %v", err)
	}
	failed := 0
	for _, r := range fake.Requests() {
		if r.Status == http.StatusServiceUnavailable {
			failed++
		}
	}
	if failed != 2 {
		t.Fatalf("%d requests failed, want 2", failed)
	}
}

func TestGivesUpOnPersistentFailure(t *testing.T) {
	fake, c := setup(t)
	fake.AlwaysFail(http.StatusBadGateway)
	_, _, err := fetchGrep(t, c, "1.2.0", nil)
	errtest.WantToken(t, err, errs.Network, fake.APIURL()+"/repos/acme/murmur-artifacts/releases/latest", "3 times", "502")
	if n := fake.Count("", ""); n != 3 {
		t.Fatalf("%d requests, want 3 (one try and two retries)", n)
	}
}

func TestStallIsBoundedByTheTimeout(t *testing.T) {
	t.Run("before the answer", func(t *testing.T) {
		fake, _ := setup(t)
		c := NewClient(ClientOptions{BaseURL: fake.APIURL(), Retries: 1, Timeout: 200 * time.Millisecond})
		c.backoff = time.Millisecond
		fake.Stall(time.Minute)
		start := time.Now()
		_, _, err := fetchGrep(t, c, "1.2.0", nil)
		errtest.WantToken(t, err, errs.Network, "no data for 200ms")
		if d := time.Since(start); d > slowdown.Scale(20*time.Second) {
			t.Fatalf("took %s", d)
		}
	})
	t.Run("within the body", func(t *testing.T) {
		fake, _ := setup(t)
		// The index must arrive within the timeout before the body stalls.
		timeout := slowdown.Scale(200 * time.Millisecond)
		c0 := NewClient(ClientOptions{BaseURL: fake.APIURL(), Token: token, Retries: 2, Timeout: timeout})
		c0.backoff = time.Millisecond
		src := NewSource(c0, nil)
		if _, err := src.Index(context.Background(), "acme"); err != nil {
			t.Fatal(err)
		}
		fake.StallStorageBody(time.Minute)
		var scratch memScratch
		_, err := src.Fetch(context.Background(), grep, "1.2.0", "any", nil, &scratch)
		errtest.WantToken(t, err, errs.Network, "broke off after", "no data for "+timeout.String())
		if scratch.Size() == 0 {
			t.Fatal("the stall was meant to come after some bytes")
		}
	})
}

func TestCancelledContext(t *testing.T) {
	fake, c := setup(t)
	fake.Stall(time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	var scratch memScratch
	_, err := NewSource(c, nil).Fetch(ctx, grep, "1.2.0", "any", nil, &scratch)
	if !errors.Is(err, context.DeadlineExceeded) || errs.TokenOf(err) != errs.Network {
		t.Fatalf("err = %v", err)
	}
}

func TestRateLimits(t *testing.T) {
	t.Run("primary 403", func(t *testing.T) {
		fake, _ := setup(t)
		reset := time.Now().Add(time.Hour).Truncate(time.Second)
		fake.RateLimitPrimary(reset)
		_, _, err := fetchGrep(t, testClient(fake, ""), "1.2.0", nil)
		errtest.WantToken(t, err, errs.RateLimited, reset.UTC().Format(time.RFC3339), "setting GITHUB_TOKEN")
		if n := fake.Count("", ""); n != 1 {
			t.Fatalf("rate-limited request retried: %d requests", n)
		}
	})
	t.Run("secondary 429", func(t *testing.T) {
		fake, c := setup(t)
		fake.RateLimitSecondary(42)
		_, _, err := fetchGrep(t, c, "1.2.0", nil)
		errtest.WantToken(t, err, errs.RateLimited, "in 42 seconds", "GITHUB_TOKEN")
		if n := fake.Count("", ""); n != 1 {
			t.Fatalf("rate-limited request retried: %d requests", n)
		}
	})
}

func TestIndexLookupsAreCached(t *testing.T) {
	fake, c := setup(t)
	ctx := context.Background()
	first := NewSource(c, nil)
	if _, err := first.Index(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	full := fake.Count("", "")
	// The latest release and the repository from the API; the index from its download link.
	if got := fake.Counts(); got != (githubtest.Counts{API: 2, Web: 1, Storage: 1}) {
		t.Fatalf("first look-up made %+v", got)
	}
	if _, err := first.Index(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	if n := fake.Count("", ""); n != full {
		t.Fatalf("a repeat within one Source made %d more requests", n-full)
	}

	fake.ResetRequests()
	if _, err := NewSource(c, nil).Index(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	reqs := fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("a repeat through the same Client: %+v", reqs)
	}
	for _, r := range reqs {
		if r.Server != githubtest.API || r.Status != http.StatusNotModified || r.Header.Get("If-None-Match") == "" {
			t.Fatalf("a repeat through the same Client: %+v", reqs)
		}
	}

	// A new index is noticed: the release's ETag changes.
	fake.AttachIndex(owner, repo, githubtest.IndexJSON("acme", art("1.2.0").Entry()))
	ix, err := NewSource(c, nil).Index(ctx, "acme")
	if err != nil || len(ix.Artifacts) != 1 {
		t.Fatalf("after a new index: %+v, %v", ix, err)
	}
}

func TestConcurrentFetchesShareOneIndex(t *testing.T) {
	fake, c := setup(t)
	src := NewSource(c, nil)
	errc := make(chan error, 4)
	for range 4 {
		go func() {
			var s memScratch
			_, err := src.Fetch(context.Background(), grep, "1.2.0", "any", nil, &s)
			errc <- err
		}()
	}
	for range 4 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	if n := fake.Count(githubtest.API, "/repos/acme/murmur-artifacts/releases/latest"); n != 1 {
		t.Fatalf("latest release asked %d times", n)
	}
}

func TestReservedScopesAndLabels(t *testing.T) {
	src := NewSource(NewClient(ClientOptions{}), func(scope string) string {
		switch scope {
		case "murmur":
			return "github:evil/default-artifacts"
		case "bad":
			return "https://github.com/bad/x"
		case "none":
			return ""
		}
		return lock.DefaultSource(scope)
	})
	for scope, ok := range map[string]bool{"local": false, "murmur": false, "bad": false, "none": false, "acme": true} {
		if _, got := src.Label(scope); got != ok {
			t.Errorf("Label(%s) ok = %v", scope, got)
		}
	}
	ctx := context.Background()
	var scratch memScratch
	_, err := src.Fetch(ctx, ref.Name{Scope: "murmur", Name: "x"}, "1.0.0", "any", nil, &scratch)
	errtest.WantToken(t, err, errs.InvalidConfig, "reserved", lock.MurmurSource, "github:evil/default-artifacts")
	_, err = src.Fetch(ctx, ref.Name{Scope: "local", Name: "x"}, "1.0.0", "any", nil, &scratch)
	errtest.WantToken(t, err, errs.NotFound, "scope local")
	_, err = src.Fetch(ctx, ref.Name{Scope: "bad", Name: "x"}, "1.0.0", "any", nil, &scratch)
	errtest.WantToken(t, err, errs.InvalidConfig, "github:OWNER/REPO")
	_, err = src.Fetch(ctx, ref.Name{Scope: "none", Name: "x"}, "1.0.0", "any", nil, &scratch)
	errtest.WantToken(t, err, errs.NotFound, "no source serves scope none")

	def := NewSource(NewClient(ClientOptions{}), nil)
	if l, ok := def.Label("murmur"); !ok || l != lock.MurmurSource {
		t.Errorf("default murmur label = %q, %v", l, ok)
	}
	if l, ok := def.Label("acme"); !ok || l != "github:acme/murmur-artifacts" {
		t.Errorf("default acme label = %q, %v", l, ok)
	}
}

func TestMurmurScopeServedByDefaultArtifacts(t *testing.T) {
	fake := githubtest.New(t)
	fake.AddRepo("murmur-nexus", "default-artifacts", 42, 43)
	hello := githubtest.Artifact{Name: "murmur/hello", Version: "0.1.0", Release: "v0.1.0", Asset: "hello.mur.zip", Data: githubtest.PackArtifact("hello", "0.1.0")}
	fake.Publish("murmur-nexus", "default-artifacts", "murmur", hello)
	var scratch memScratch
	got, err := NewSource(testClient(fake, ""), nil).Fetch(context.Background(), ref.Name{Scope: "murmur", Name: "hello"}, "latest", "any", nil, &scratch)
	if err != nil || got.Origin != lock.MurmurSource || got.NewPin.OwnerID != 42 {
		t.Fatalf("murmur/hello: %+v, %v", got, err)
	}
}

func TestDownloadAssetNoticesOverlongBodies(t *testing.T) {
	fake, c := setup(t)
	a := art("1.2.0")
	rel, err := c.ReleaseByTag(context.Background(), owner, repo, "v1.2.0")
	if err != nil {
		t.Fatal(err)
	}
	asset, _ := rel.Asset(a.Asset)
	for _, needsToken := range []bool{false, true} {
		var buf bytes.Buffer
		n, err := c.DownloadAsset(context.Background(), owner, repo, asset, needsToken, 10, &buf)
		if err != nil || n != 11 || buf.Len() != 11 {
			t.Fatalf("limited download (needsToken %v): %d bytes, %v", needsToken, n, err)
		}
		buf.Reset()
		n, err = c.DownloadAsset(context.Background(), owner, repo, asset, needsToken, 0, &buf)
		if err != nil || !bytes.Equal(buf.Bytes(), a.Data) || n != int64(len(a.Data)) {
			t.Fatalf("full download (needsToken %v): %d bytes, %v", needsToken, n, err)
		}
	}
	if got := fake.Counts(); got.Web != 2 || got.APIDownloads != 2 {
		t.Fatalf("counts %+v: want two downloads through each path", got)
	}
	_, err = c.DownloadAsset(context.Background(), owner, repo, Asset{ID: 1}, false, 0, &bytes.Buffer{})
	errtest.WantToken(t, err, errs.NotFound, "asset 1 in acme/murmur-artifacts")
}

func TestBadBaseURL(t *testing.T) {
	c := NewClient(ClientOptions{BaseURL: "api.github.com"})
	_, err := c.Repo(context.Background(), owner, repo)
	errtest.WantToken(t, err, errs.InvalidConfig, "MUR_GITHUB_API_BASE")
}

func TestClientOptionsFromEnv(t *testing.T) {
	t.Setenv("MUR_GITHUB_API_BASE", "http://127.0.0.1:1/api/v3/")
	t.Setenv("GITHUB_TOKEN", "abc")
	o := ClientOptionsFromEnv()
	if o.BaseURL != "http://127.0.0.1:1/api/v3/" || o.Token != "abc" {
		t.Fatalf("%+v", o)
	}
	c := NewClient(o)
	if got := c.apiURL("repos", "a", "b"); got != "http://127.0.0.1:1/api/v3/repos/a/b" {
		t.Fatalf("apiURL = %s", got)
	}
}

func TestConcurrentFetchesShareAFailure(t *testing.T) {
	fake, c := setup(t)
	fake.AlwaysFail(http.StatusInternalServerError)
	fake.Stall(slowdown.Scale(100 * time.Millisecond)) // keeps the first look-up in flight while the others arrive
	src := NewSource(c, nil)
	errc := make(chan error, 4)
	for range 4 {
		go func() {
			var s memScratch
			_, err := src.Fetch(context.Background(), grep, "1.2.0", "any", nil, &s)
			errc <- err
		}()
	}
	for range 4 {
		if err := <-errc; !errors.Is(err, errs.Network) {
			t.Fatalf("err = %v", err)
		}
	}
	// The waiting fetches share the first one's failure instead of each retrying in turn.
	if n := fake.Count(githubtest.API, "/repos/acme/murmur-artifacts/releases/latest"); n != 3 {
		t.Fatalf("latest release asked %d times, want 3 (one try and two retries)", n)
	}
}
