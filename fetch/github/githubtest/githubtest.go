// Package githubtest is a local stand-in for GitHub's REST API, its web host's release downloads
// and its release-asset storage, for tests of mur's GitHub source (SPEC sections 8 and 15).
//
// Three servers on 127.0.0.1 play GitHub's three hosts:
//   - API (api.github.com) serves, as GitHub documents them, GET /repos/{o}/{r}, /releases/latest,
//     /releases/tags/{tag}, /releases/assets/{id} and /attestations/{subject_digest} (whose
//     bundle_url entries storage serves snappy-compressed). An asset asked for with
//     `Accept: application/octet-stream` answers 302 to storage. JSON answers carry ETags and
//     honour If-None-Match. Every API request counts against an optional hourly rate limit.
//   - Web (github.com) serves /{o}/{r}/releases/download/{tag}/{name}, each asset's
//     browser_download_url, with a 302 to storage; it spends no API quota. A private repository's
//     downloads are 404 there, as they are on github.com to a client without a browser session.
//   - Storage serves the signed URLs both redirect to. Like S3 or Azure, it honours a single
//     Range (and If-Range against its strong ETag), and its links expire (LinkTTL, ExpireLinks),
//     so a download that outlives its link must ask for a fresh redirect.
//
// Web and storage refuse any request that carries an Authorization header, so a credential that
// leaks past the API fails the test that leaked it. Switches make the fake misbehave: a changed
// owner id, replaced asset bytes, wrong advertised sizes and digests, 5xx answers, stalls and both
// kinds of rate limit. Every request is recorded, with its headers, for assertions.
package githubtest

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Which server a request reached.
const (
	API     = "api"
	Web     = "web"
	Storage = "storage"
)

// Request is one request the fake saw.
type Request struct {
	Server string // API, Web or Storage
	Method string
	Path   string
	Query  string
	Header http.Header
	Status int // 0 while the answer is still being written
}

type repo struct {
	owner, name string
	ownerID     int64
	repoID      int64
	releases    []*release // in the order they were added
}

type release struct {
	id         int64
	tag        string
	draft      bool
	prerelease bool
	assets     []*asset
}

type asset struct {
	id          int64
	tag         string // of its release, for its browser_download_url
	name        string
	data        []byte
	size        int64  // advertised
	digest      string // advertised, "" for none (GitHub omits it for older assets)
	contentType string
	owner, repo string
}

// Reporter hears of a misuse of the fake (a release added twice, an asset that does not exist):
// a test's testing.TB, or a program's own (contrib/ghreleases).
type Reporter interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Server is a fake GitHub: its API, web and storage hosts, each on 127.0.0.1.
type Server struct {
	t       Reporter
	api     *httptest.Server
	web     *httptest.Server
	storage *httptest.Server
	secret  []byte

	mu          sync.Mutex
	repos       map[string]*repo // key: lowercased owner/repo
	assets      map[int64]*asset
	nextID      int64
	requests    []Request
	failNext    int
	failStatus  int
	alwaysFail  int
	stall       time.Duration
	stallBody   time.Duration
	limitStatus int // 403 or 429 while rate limited
	limitReset  time.Time
	retryAfter  int
	token       string
	failMessage string            // the message of failed answers; "" is the status text
	failOn      map[string]int    // server -> status every request to it gets
	via         map[string]string // server -> the base URL links to it advertise
	apiLimit    int               // API calls allowed per hour; 0 means no limit
	apiUsed     int
	apiReset    time.Time     // end of the current rate-limit window
	linkTTL     time.Duration // how long a signed storage link opens
	expiredTill time.Time     // links signed before this have expired, whatever their TTL

	attestations map[string][]*attestation // by lowercased owner/repo@subject digest
}

// New starts the fake and closes it when the test ends.
func New(t testing.TB) *Server {
	t.Helper()
	s := Start(t)
	t.Cleanup(s.Close)
	return s
}

// Start starts the fake for r, which the caller closes: a program's, such as contrib/ghreleases,
// which serves a publisher's files as releases before the first real one.
func Start(t Reporter) *Server {
	s := &Server{
		t:       t,
		secret:  []byte("githubtest-signing-key"),
		repos:   map[string]*repo{},
		assets:  map[int64]*asset{},
		nextID:  1000,
		failOn:  map[string]int{},
		via:     map[string]string{},
		linkTTL: 5 * time.Minute,
	}
	s.api = httptest.NewServer(http.HandlerFunc(s.serveAPI))
	s.web = httptest.NewServer(http.HandlerFunc(s.serveWeb))
	s.storage = httptest.NewServer(http.HandlerFunc(s.serveStorage))
	return s
}

// Close stops the servers. Stalled handlers give up as their connections close.
func (s *Server) Close() {
	for _, srv := range []*httptest.Server{s.api, s.web, s.storage} {
		srv.CloseClientConnections()
		srv.Close()
	}
}

// APIURL is the base URL to use as MUR_GITHUB_API_BASE.
func (s *Server) APIURL() string { return s.api.URL }

// WebURL is the base URL of the web host, which every asset's browser_download_url points at.
// mur needs no setting for it: the API's answers carry those absolute URLs.
func (s *Server) WebURL() string { return s.web.URL }

// StorageURL is the base URL of the storage host that asset downloads redirect to.
func (s *Server) StorageURL() string { return s.storage.URL }

// AdvertiseVia makes the links the fake hands out to server (Web or Storage) point at base
// instead: browser_download_url for Web, the redirects' Location for Storage. base is typically a
// proxytest.Proxy in front of WebURL() or StorageURL(); "" restores the server's own URL.
func (s *Server) AdvertiseVia(server, base string) {
	s.t.Helper()
	if server != Web && server != Storage {
		s.t.Fatalf("githubtest: AdvertiseVia(%q): only Web and Storage links can be redirected", server)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.via[server] = strings.TrimRight(base, "/")
}

func (s *Server) baseLocked(server string) string {
	if b := s.via[server]; b != "" {
		return b
	}
	if server == Web {
		return s.web.URL
	}
	return s.storage.URL
}

// RequireToken makes every repository private: the API answers 404, as GitHub does for a private
// repository, to any request without `Authorization: Bearer <token>`, its JSON says
// "private": true, and the web host answers 404 to its download links, which only a browser
// session could open. An empty token turns this off.
func (s *Server) RequireToken(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.token = token
}

func (s *Server) id() int64 {
	s.nextID++
	return s.nextID
}

func (s *Server) repoLocked(owner, name string) *repo {
	s.t.Helper()
	r := s.repos[strings.ToLower(owner+"/"+name)]
	if r == nil {
		s.t.Fatalf("githubtest: no repository %s/%s; call AddRepo first", owner, name)
	}
	return r
}

func (s *Server) assetLocked(owner, name, tag, assetName string) *asset {
	s.t.Helper()
	rel := s.repoLocked(owner, name).release(tag)
	if rel == nil {
		s.t.Fatalf("githubtest: no release %s in %s/%s", tag, owner, name)
	}
	for _, a := range rel.assets {
		if a.name == assetName {
			return a
		}
	}
	s.t.Fatalf("githubtest: release %s of %s/%s has no asset %s", tag, owner, name, assetName)
	return nil
}

func (r *repo) release(tag string) *release {
	for _, rel := range r.releases {
		if rel.tag == tag {
			return rel
		}
	}
	return nil
}

func (r *repo) latest() *release {
	for i := len(r.releases) - 1; i >= 0; i-- {
		if rel := r.releases[i]; !rel.draft && !rel.prerelease {
			return rel
		}
	}
	return nil
}
