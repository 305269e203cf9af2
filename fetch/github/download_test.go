package github

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/fetch/github/githubtest"
	"github.com/murmur-nexus/mur/fetch/proxytest"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
	"github.com/murmur-nexus/mur/internal/slowdown"
)

// noCredentialsOffTheAPI fails t if a web or storage request carried the token, or if the fake
// refused one for carrying any credential.
func noCredentialsOffTheAPI(t *testing.T, fake *githubtest.Server) {
	t.Helper()
	for _, r := range fake.Requests() {
		if r.Server == githubtest.API {
			continue
		}
		for k, v := range r.Header {
			if strings.EqualFold(k, "Authorization") || strings.Contains(strings.Join(v, " "), token) {
				t.Errorf("the %s host saw a credential in %s: %v", r.Server, k, v)
			}
		}
		if r.Status == http.StatusBadRequest {
			t.Errorf("the %s host refused %s", r.Server, r.Path)
		}
	}
}

// A public repository's index and payload come through their download links: the only API
// calls are the latest release and the repository, even with a token at hand.
func TestPublicAssetsSpendNoAPIQuota(t *testing.T) {
	fake, c := setup(t)
	fake.LimitAPI(2)
	got, scratch, err := fetchGrep(t, c, "1.2.0", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(scratch.Bytes(), art("1.2.0").Data) || got.Digest.Encoded() != art("1.2.0").SHA256() {
		t.Fatal("scratch does not hold the published bytes")
	}
	if counts := fake.Counts(); counts != (githubtest.Counts{API: 2, Web: 2, Storage: 2}) {
		t.Fatalf("counts %+v, want 2 API calls and both assets through the web host", counts)
	}
	for _, r := range fake.Requests() {
		if r.Server == githubtest.API && r.Header.Get("Authorization") != "Bearer "+token {
			t.Errorf("API request %s without the token", r.Path)
		}
		if r.Server == githubtest.Web && (r.Status != http.StatusFound || !strings.HasPrefix(r.Path, "/acme/murmur-artifacts/releases/download/v1.2.0/")) {
			t.Errorf("web request %s answered %d", r.Path, r.Status)
		}
	}
	noCredentialsOffTheAPI(t, fake)
}

// Whatever goes wrong with a download link before its first byte, the API endpoint serves the
// asset instead.
func TestBrokenDownloadLinkFallsBackToTheAPI(t *testing.T) {
	// Each case breaks the links and returns how many times one was tried.
	cases := []struct {
		name   string
		break_ func(t *testing.T, fake *githubtest.Server) (tries func() int)
	}{
		{"web host 404", func(t *testing.T, fake *githubtest.Server) func() int {
			fake.FailServer(githubtest.Web, http.StatusNotFound)
			return func() int { return fake.Counts().Web }
		}},
		{"web host 503", func(t *testing.T, fake *githubtest.Server) func() int {
			fake.FailServer(githubtest.Web, http.StatusServiceUnavailable)
			return func() int { return fake.Counts().Web }
		}},
		{"web host silent", func(t *testing.T, fake *githubtest.Server) func() int {
			p := proxytest.Start(t, fake.WebURL(), proxytest.Options{Fault: proxytest.Silence})
			fake.AdvertiseVia(githubtest.Web, p.URL())
			return func() int { return p.Requests("") }
		}},
		{"storage drops the link's answer before its body", func(t *testing.T, fake *githubtest.Server) func() int {
			p := proxytest.Start(t, fake.StorageURL(), proxytest.Options{Fault: proxytest.Cut, After: 0, Times: 1})
			fake.AdvertiseVia(githubtest.Storage, p.URL())
			return func() int { return p.Faults() }
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fake, _ := setup(t)
			c := NewClient(ClientOptions{BaseURL: fake.APIURL(), Token: token, Retries: 2, Timeout: slowdown.Scale(300 * time.Millisecond)})
			c.backoff = time.Millisecond
			tries := tc.break_(t, fake)
			_, scratch, err := fetchGrep(t, c, "1.2.0", nil)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(scratch.Bytes(), art("1.2.0").Data) {
				t.Fatal("scratch does not hold the published bytes")
			}
			if counts := fake.Counts(); counts.APIDownloads == 0 || tries() == 0 {
				t.Fatalf("counts %+v, %d tries of a link: want a try of the link, then the API", counts, tries())
			}
			noCredentialsOffTheAPI(t, fake)
		})
	}
}

// Once bytes reached the scratch, a broken link is not papered over by a second download that
// would append to them: the pull fails, as a broken API download does.
func TestDownloadLinkBreakingOffMidBody(t *testing.T) {
	fake, c := setup(t)
	p := proxytest.Start(t, fake.StorageURL(), proxytest.Options{Fault: proxytest.Cut, After: 100})
	fake.AdvertiseVia(githubtest.Storage, p.URL())
	_, _, err := fetchGrep(t, c, "1.2.0", nil)
	errtest.WantToken(t, err, errs.Network, "murmur-index.json", "broke off after 100 bytes")
	if counts := fake.Counts(); counts.APIDownloads != 0 || counts.Web != 1 || p.Faults() != 1 {
		t.Fatalf("counts %+v, faults %d", counts, p.Faults())
	}
}

// A web host can answer a link with something that is not the asset at all: a login page (an
// enterprise server in private mode) or a body of another length. Nothing of it reaches w.
func TestDownloadLinkAnswersSomethingElse(t *testing.T) {
	payload := []byte("the real asset")
	for name, answer := range map[string]func(w http.ResponseWriter){
		"login page": func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.(http.Flusher).Flush() // no Content-Length: only the media type gives it away
			_, _ = w.Write([]byte("<html>Sign in</html>"))
		},
		"wrong length": func(w http.ResponseWriter) { _, _ = w.Write([]byte("short")) },
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Path {
				case "/o/r/releases/download/v1/a":
					answer(w)
				case "/repos/o/r/releases/assets/9":
					_, _ = w.Write(payload)
				default:
					http.NotFound(w, r)
				}
			}))
			defer srv.Close()
			c := NewClient(ClientOptions{BaseURL: srv.URL, Retries: -1})
			a := Asset{ID: 9, Name: "a", Size: int64(len(payload)), BrowserDownloadURL: srv.URL + "/o/r/releases/download/v1/a"}
			var buf bytes.Buffer
			if n, err := c.DownloadAsset(context.Background(), "o", "r", a, false, a.Size, &buf); err != nil || n != a.Size || !bytes.Equal(buf.Bytes(), payload) {
				t.Fatalf("%d bytes %q, %v", n, buf.Bytes(), err)
			}
		})
	}
}

// hostRecorder is one host that plays an enterprise server: the API under /api/v3, download
// links and storage beside it. It records which paths saw which Authorization header.
type hostRecorder struct {
	*httptest.Server
	mu   sync.Mutex
	auth map[string][]string // cleaned path -> Authorization headers seen
}

func enterpriseHost(t *testing.T) *hostRecorder {
	h := &hostRecorder{auth: map[string][]string{}}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := path.Clean(r.URL.Path)
		h.mu.Lock()
		h.auth[p] = append(h.auth[p], r.Header.Get("Authorization"))
		h.mu.Unlock()
		switch {
		case p == "/api/v3/repos/o/r/releases/assets/9", p == "/o/r/releases/download/v1/a":
			http.Redirect(w, r, "/storage/9?sig=x", http.StatusFound)
		case p == "/storage/9" && r.Header.Get("Authorization") == "":
			_, _ = w.Write([]byte("payload"))
		default:
			http.Error(w, "no", http.StatusBadRequest)
		}
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hostRecorder) seen(p string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.auth[p]
}

// GITHUB_TOKEN goes only under the API base. On an enterprise server the web pages and storage
// share the API's host, so the host alone would not keep the token in.
func TestTokenStaysUnderTheAPIBase(t *testing.T) {
	for _, link := range []string{"/o/r/releases/download/v1/a", "/api/v3/../../o/r/releases/download/v1/a"} {
		t.Run(link, func(t *testing.T) {
			h := enterpriseHost(t)
			c := NewClient(ClientOptions{BaseURL: h.URL + "/api/v3/", Token: token, Retries: -1})
			a := Asset{ID: 9, Name: "a", Size: 7, BrowserDownloadURL: h.URL + link}
			for _, needsToken := range []bool{false, true} {
				var buf bytes.Buffer
				if _, err := c.DownloadAsset(context.Background(), "o", "r", a, needsToken, 7, &buf); err != nil || buf.String() != "payload" {
					t.Fatalf("needsToken %v: %q, %v", needsToken, buf.String(), err)
				}
			}
			if got := h.seen("/o/r/releases/download/v1/a"); len(got) != 1 || got[0] != "" {
				t.Errorf("the download link saw %q", got)
			}
			if got := h.seen("/api/v3/repos/o/r/releases/assets/9"); len(got) != 1 || got[0] != "Bearer "+token {
				t.Errorf("the API endpoint saw %q", got)
			}
			if got := h.seen("/storage/9"); len(got) != 2 || got[0] != "" || got[1] != "" {
				t.Errorf("storage saw %q", got)
			}
		})
	}
}

// Behind an https API, neither a download link nor a redirect may drop to plain http.
func TestNoDowngradeToPlainHTTP(t *testing.T) {
	var plainHits int
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		plainHits++
		_, _ = w.Write([]byte("payload"))
	}))
	defer plain.Close()
	redirectToPlain := false
	api := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if redirectToPlain {
			http.Redirect(w, r, plain.URL+"/storage/9", http.StatusFound)
			return
		}
		_, _ = w.Write([]byte("payload"))
	}))
	defer api.Close()
	c := NewClient(ClientOptions{BaseURL: api.URL, HTTPClient: api.Client(), Retries: -1})
	a := Asset{ID: 9, Name: "a", Size: 7, BrowserDownloadURL: plain.URL + "/o/r/releases/download/v1/a"}

	var buf bytes.Buffer
	if _, err := c.DownloadAsset(context.Background(), "o", "r", a, false, 7, &buf); err != nil || buf.String() != "payload" || plainHits != 0 {
		t.Fatalf("plain-http link: %q, %v, %d plain requests", buf.String(), err, plainHits)
	}
	redirectToPlain = true
	_, err := c.DownloadAsset(context.Background(), "o", "r", a, false, 7, &bytes.Buffer{})
	errtest.WantToken(t, err, errs.Network, "from https to plain http")
	if plainHits != 0 {
		t.Fatalf("%d requests reached the plain-http host", plainHits)
	}
}

func TestNeedsToken(t *testing.T) {
	for _, tc := range []struct {
		r    Repository
		want bool
	}{
		{Repository{}, false},
		{Repository{Visibility: "public"}, false},
		{Repository{Private: true, Visibility: "private"}, true},
		{Repository{Private: true}, true},
		{Repository{Visibility: "internal"}, true},
	} {
		if got := tc.r.NeedsToken(); got != tc.want {
			t.Errorf("%+v: NeedsToken() = %v", tc.r, got)
		}
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestDownloadLinkIntoAFailingWriter(t *testing.T) {
	fake, c := setup(t)
	rel, err := c.ReleaseByTag(context.Background(), owner, repo, "v1.2.0")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := rel.Asset(art("1.2.0").Asset)
	_, err = c.DownloadAsset(context.Background(), owner, repo, a, false, 0, failingWriter{})
	errtest.WantToken(t, err, errs.IO, a.Name, "disk full")
	if counts := fake.Counts(); counts.APIDownloads != 0 {
		t.Fatalf("a local write failure fell back to the API: %+v", counts)
	}
}
