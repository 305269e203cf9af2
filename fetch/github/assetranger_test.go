package github

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/murmur-nexus/mur/fetch/github/githubtest"
	"github.com/murmur-nexus/mur/fetch/internal/download"
	"github.com/murmur-nexus/mur/fetch/proxytest"
	"github.com/murmur-nexus/mur/internal/errs"
)

// grepAsset is the release asset of grep@1.2.0 as the API describes it.
func grepAsset(t *testing.T, c *Client) Asset {
	t.Helper()
	rel, err := c.ReleaseByTag(context.Background(), owner, repo, "v1.2.0")
	if err != nil {
		t.Fatal(err)
	}
	a, ok := rel.Asset("grep-1.2.0.mur.zip")
	if !ok {
		t.Fatal("no asset")
	}
	return a
}

func readRange(t *testing.T, r download.Ranger, off, end int64, validator string) string {
	t.Helper()
	p, err := r.Open(context.Background(), off, end, validator)
	return readPart(t, p, err)
}

func readPart(t *testing.T, p download.Part, err error) string {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Body.Close()
	b, err := io.ReadAll(p.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Pieces of an asset come from one redirect: the download link once, then its storage URL.
func TestAssetRangerReusesItsRedirect(t *testing.T) {
	fake, c := setup(t)
	a := grepAsset(t, c)
	data := string(art("1.2.0").Data)
	fake.ResetRequests()
	r := c.AssetRanger(owner, repo, a, false)
	for _, rng := range [][2]int64{{0, 9}, {10, 99}, {100, a.Size - 1}} {
		if got := readRange(t, r, rng[0], rng[1], ""); got != data[rng[0]:rng[1]+1] {
			t.Fatalf("bytes %d-%d: %q", rng[0], rng[1], got)
		}
	}
	if got := readRange(t, r, 0, -1, ""); got != data {
		t.Fatal("the whole asset differs")
	}
	if c := fake.Counts(); c != (githubtest.Counts{Web: 1, Storage: 4}) {
		t.Fatalf("counts %+v, want one link and four storage requests", c)
	}
	noCredentialsOffTheAPI(t, fake)
}

// An expired storage URL makes the Open ask for a fresh redirect; a private repository asks the
// API, with its token, and storage never sees it.
func TestAssetRangerRenewsAnExpiredLink(t *testing.T) {
	for _, private := range []bool{false, true} {
		fake, c := setup(t)
		if private {
			fake.RequireToken(token)
		}
		a := grepAsset(t, c)
		data := string(art("1.2.0").Data)
		r := c.AssetRanger(owner, repo, a, private)
		readRange(t, r, 0, 9, "")
		fake.ExpireLinks()
		fake.ResetRequests()
		if got := readRange(t, r, 10, 19, ""); got != data[10:20] {
			t.Fatalf("private %v: %q", private, got)
		}
		want := githubtest.Counts{Web: 1, Storage: 2}
		if private {
			want = githubtest.Counts{API: 1, APIDownloads: 1, Storage: 2}
		}
		if c := fake.Counts(); c != want {
			t.Fatalf("private %v: counts %+v, want %+v", private, c, want)
		}
		noCredentialsOffTheAPI(t, fake)
	}
}

// A link that fails before its first byte falls back to the API, for good.
func TestAssetRangerFallsBackToTheAPI(t *testing.T) {
	fake, c := setup(t)
	a := grepAsset(t, c)
	fake.FailServer(githubtest.Web, http.StatusServiceUnavailable)
	fake.ResetRequests()
	r := c.AssetRanger(owner, repo, a, false)
	readRange(t, r, 0, 9, "")
	fake.ExpireLinks()
	readRange(t, r, 10, 19, "")
	if c := fake.Counts(); c.Web != 1 || c.APIDownloads != 2 {
		t.Fatalf("counts %+v: the link once, then the API", c)
	}
}

// Only 206 with exactly the range asked for is a piece; storage that ignores Range sends the
// whole asset, which says so; a range past the end is refused without reading the body.
func TestAssetRangerChecksTheAnswer(t *testing.T) {
	fake, c := setup(t)
	a := grepAsset(t, c)
	px := proxytest.Start(t, fake.StorageURL(), proxytest.Options{IgnoreRange: true})
	fake.AdvertiseVia(githubtest.Storage, px.URL())
	r := c.AssetRanger(owner, repo, a, false)
	p, err := r.Open(context.Background(), 10, 19, "")
	if err != nil || !p.Whole || p.Validator == "" {
		t.Fatalf("ignored range: %+v %v", p, err)
	}
	if got := readPart(t, p, nil); got != string(art("1.2.0").Data) {
		t.Fatal("the whole asset differs")
	}
	px.Set(proxytest.Options{})
	_, err = r.Open(context.Background(), a.Size, a.Size+5, "")
	if !errors.Is(err, download.ErrNoRanges) || errs.TokenOf(err) != errs.Network {
		t.Fatalf("a range past the end: %v", err)
	}
	if _, err := r.Open(context.Background(), 5, 9, `"stale"`); err != nil {
		t.Fatal(err)
	}
}

// A body that breaks off is a network error the pull can continue after.
func TestAssetBodyBreaksOffAsNetwork(t *testing.T) {
	fake, c := setup(t)
	a := grepAsset(t, c)
	px := proxytest.Start(t, fake.StorageURL(), proxytest.Options{Fault: proxytest.Cut, After: 50})
	fake.AdvertiseVia(githubtest.Storage, px.URL())
	p, err := c.AssetRanger(owner, repo, a, false).Open(context.Background(), 0, -1, "")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Body.Close()
	n, err := io.Copy(io.Discard, p.Body)
	if n != 50 || errs.TokenOf(err) != errs.Network || !strings.Contains(err.Error(), "broke off after 50") {
		t.Fatalf("read %d: %v", n, err)
	}
}

// A download link that answers with something that is not the asset (a login page, a body of
// another length) sends the ranger to the API, as it does DownloadAsset.
func TestAssetRangerLinkAnswersSomethingElse(t *testing.T) {
	payload := []byte("the real asset")
	for name, answer := range map[string]func(w http.ResponseWriter){
		"login page": func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.(http.Flusher).Flush()
			_, _ = w.Write([]byte("<html>Sign in</html>"))
		},
		"wrong length": func(w http.ResponseWriter) { _, _ = w.Write([]byte("short")) },
		"redirect loop": func(w http.ResponseWriter) {
			w.Header().Set("Location", "/o/r/releases/download/v1/a")
			w.WriteHeader(http.StatusFound)
		},
	} {
		t.Run(name, func(t *testing.T) {
			api := 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Path {
				case "/o/r/releases/download/v1/a":
					answer(w)
				case "/repos/o/r/releases/assets/9":
					api++
					_, _ = w.Write(payload)
				default:
					http.NotFound(w, r)
				}
			}))
			defer srv.Close()
			c := NewClient(ClientOptions{BaseURL: srv.URL, Retries: -1})
			a := Asset{ID: 9, Name: "a", Size: int64(len(payload)), BrowserDownloadURL: srv.URL + "/o/r/releases/download/v1/a"}
			r := c.AssetRanger("o", "r", a, false)
			if got := readRange(t, r, 0, -1, ""); got != string(payload) || api != 1 {
				t.Fatalf("%q after %d API requests", got, api)
			}
		})
	}
}
