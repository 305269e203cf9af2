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
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
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

// Server is a fake GitHub: its API, web and storage hosts, each on 127.0.0.1.
type Server struct {
	t       testing.TB
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
	t.Cleanup(s.Close)
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

// AddRepo creates owner/repo with the given owner and repository ids.
func (s *Server) AddRepo(owner, name string, ownerID, repoID int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repos[strings.ToLower(owner+"/"+name)] = &repo{owner: owner, name: name, ownerID: ownerID, repoID: repoID}
}

// AddRelease publishes a release with the given assets. The latest release is the last one added
// that is neither a draft nor a prerelease.
func (s *Server) AddRelease(owner, name, tag string, assets map[string][]byte) {
	s.t.Helper()
	s.addRelease(owner, name, tag, false, false, assets)
}

// AddDraftRelease adds a draft release, which GitHub hides from unauthenticated readers (404).
func (s *Server) AddDraftRelease(owner, name, tag string, assets map[string][]byte) {
	s.t.Helper()
	s.addRelease(owner, name, tag, true, false, assets)
}

// AddPrerelease adds a prerelease, which /releases/latest never answers with.
func (s *Server) AddPrerelease(owner, name, tag string, assets map[string][]byte) {
	s.t.Helper()
	s.addRelease(owner, name, tag, false, true, assets)
}

func (s *Server) addRelease(owner, name, tag string, draft, pre bool, assets map[string][]byte) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repoLocked(owner, name)
	if r.release(tag) != nil {
		s.t.Fatalf("githubtest: release %s already exists in %s/%s", tag, owner, name)
	}
	rel := &release{id: s.id(), tag: tag, draft: draft, prerelease: pre}
	r.releases = append(r.releases, rel)
	names := make([]string, 0, len(assets))
	for n := range assets {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		s.addAssetLocked(r, rel, n, assets[n])
	}
}

// AddAsset attaches one more asset to an existing release, or replaces the asset of that name with
// a new upload (a new id, size and digest), as deleting and re-uploading does on GitHub.
func (s *Server) AddAsset(owner, name, tag, assetName string, data []byte) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repoLocked(owner, name)
	rel := r.release(tag)
	if rel == nil {
		s.t.Fatalf("githubtest: no release %s in %s/%s", tag, owner, name)
	}
	for i, a := range rel.assets {
		if a.name == assetName {
			rel.assets = append(rel.assets[:i], rel.assets[i+1:]...)
			delete(s.assets, a.id)
			break
		}
	}
	s.addAssetLocked(r, rel, assetName, data)
}

func (s *Server) addAssetLocked(r *repo, rel *release, name string, data []byte) {
	sum := sha256.Sum256(data)
	a := &asset{
		id:          s.id(),
		tag:         rel.tag,
		name:        name,
		data:        bytes.Clone(data),
		size:        int64(len(data)),
		digest:      "sha256:" + hex.EncodeToString(sum[:]),
		contentType: contentTypeOf(name),
		owner:       r.owner,
		repo:        r.name,
	}
	rel.assets = append(rel.assets, a)
	s.assets[a.id] = a
}

func contentTypeOf(name string) string {
	switch {
	case strings.HasSuffix(name, ".json"):
		return "application/json"
	case strings.HasSuffix(name, ".zip"):
		return "application/zip"
	}
	return "application/octet-stream"
}

// SetOwnerID changes the numeric id of the repository's owner, as a transfer does.
func (s *Server) SetOwnerID(owner, name string, ownerID int64) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repoLocked(owner, name).ownerID = ownerID
}

// ReplaceAssetBytes swaps the bytes behind an asset under the same release tag and asset id. With
// keepAdvertised the asset's JSON still shows the old size and digest; without, it shows the new
// bytes' size and digest (only the publisher's index still tells the difference).
func (s *Server) ReplaceAssetBytes(owner, name, tag, assetName string, data []byte, keepAdvertised bool) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.assetLocked(owner, name, tag, assetName)
	a.data = bytes.Clone(data)
	if !keepAdvertised {
		sum := sha256.Sum256(data)
		a.size = int64(len(data))
		a.digest = "sha256:" + hex.EncodeToString(sum[:])
	}
}

// Advertise sets the size and digest an asset's JSON shows, without touching its bytes. A digest
// of "" omits the field, as GitHub does for assets uploaded before it computed digests.
func (s *Server) Advertise(owner, name, tag, assetName string, size int64, digest string) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.assetLocked(owner, name, tag, assetName)
	a.size = size
	a.digest = digest
}

// AssetID is the id of a release's asset.
func (s *Server) AssetID(owner, name, tag, assetName string) int64 {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.assetLocked(owner, name, tag, assetName).id
}

// FailNext makes the next n requests (to any server) answer with status, a 5xx.
func (s *Server) FailNext(n, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failNext, s.failStatus = n, status
}

// AlwaysFail makes every request answer with status; 0 turns it off.
func (s *Server) AlwaysFail(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.alwaysFail = status
}

// FailMessage makes failed answers carry msg as GitHub's "message" instead of the status text:
// a hostile server's, say, with control sequences in it.
func (s *Server) FailMessage(msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failMessage = msg
}

// FailServer makes every request to server (API, Web or Storage) answer with status; 0 turns it
// off.
func (s *Server) FailServer(server string, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failOn[server] = status
}

// LimitAPI allows n API calls an hour, as GitHub's primary rate limit does (60 for a client
// without a token). The window starts with the first call after LimitAPI; the call after the
// n-th answers 403 with x-ratelimit-remaining: 0 and x-ratelimit-reset. A 304 to a request with
// a token costs nothing, as on GitHub. Web and storage requests never count. 0 removes the limit.
func (s *Server) LimitAPI(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.apiLimit, s.apiUsed, s.apiReset = n, 0, time.Time{}
}

// Stall holds every answer, before its headers, for d or until the client gives up.
func (s *Server) Stall(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stall = d
}

// StallStorageBody makes the storage host send half of each body and then hold the rest for d or
// until the client gives up.
func (s *Server) StallStorageBody(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stallBody = d
}

// RateLimitPrimary makes the API answer 403 with x-ratelimit-remaining: 0 and the given reset
// time, as an exhausted hourly limit does.
func (s *Server) RateLimitPrimary(reset time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limitStatus, s.limitReset, s.retryAfter = http.StatusForbidden, reset, 0
}

// RateLimitSecondary makes the API answer 429 with retry-after: seconds, as a secondary
// (abuse) limit does.
func (s *Server) RateLimitSecondary(seconds int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limitStatus, s.limitReset, s.retryAfter = http.StatusTooManyRequests, time.Time{}, seconds
}

// Behave turns every misbehaviour switch off (asset replacements stay).
func (s *Server) Behave() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failNext, s.alwaysFail, s.stall, s.stallBody, s.limitStatus = 0, 0, 0, 0, 0
	s.failOn = map[string]int{}
}

// Requests is a copy of every request seen so far, in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.requests))
	for i, r := range s.requests {
		r.Header = r.Header.Clone()
		out[i] = r
	}
	return out
}

// ResetRequests forgets the requests seen so far.
func (s *Server) ResetRequests() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = nil
}

// Count is the number of requests seen by server (API, Web, Storage, or "" for all) whose path
// starts with pathPrefix ("" for all).
func (s *Server) Count(server, pathPrefix string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.requests {
		if (server == "" || r.Server == server) && strings.HasPrefix(r.Path, pathPrefix) {
			n++
		}
	}
	return n
}

// Counts are the requests seen so far, by what they cost.
type Counts struct {
	API          int // every API call: what GitHub's rate limit counts
	APIDownloads int // of those, asset downloads through /releases/assets/{id}
	Web          int // download links opened on the web host (no API quota)
	Storage      int // requests to the storage host
}

// Counts sorts the requests seen so far by what they cost.
func (s *Server) Counts() Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	var c Counts
	for _, r := range s.requests {
		switch r.Server {
		case API:
			c.API++
			if strings.Contains(r.Path, "/releases/assets/") && acceptsOctetStream(r.Header.Get("Accept")) {
				c.APIDownloads++
			}
		case Web:
			c.Web++
		case Storage:
			c.Storage++
		}
	}
	return c
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

// statusWriter remembers the status of the answer, for Requests.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// begin records the request and applies the switches every request is subject to. It reports
// whether the handler should go on to answer normally.
func (s *Server) begin(server string, w *statusWriter, r *http.Request) (done func(), proceed bool) {
	s.mu.Lock()
	idx := len(s.requests)
	s.requests = append(s.requests, Request{
		Server: server, Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(),
	})
	stall := s.stall
	fail := s.alwaysFail
	if fail == 0 {
		fail = s.failOn[server]
	}
	if fail == 0 && s.failNext > 0 {
		s.failNext--
		fail = s.failStatus
	}
	limit, reset, retryAfter := 0, s.limitReset, s.retryAfter
	charged := false
	if server == API {
		limit = s.limitStatus
		if limit == 0 && s.apiLimit > 0 {
			now := time.Now()
			if s.apiReset.IsZero() || now.After(s.apiReset) {
				s.apiUsed, s.apiReset = 0, now.Add(time.Hour)
			}
			if s.apiUsed >= s.apiLimit {
				limit, reset = http.StatusForbidden, s.apiReset
			} else {
				s.apiUsed++
				charged = true
			}
			w.Header().Set("X-RateLimit-Limit", strconv.Itoa(s.apiLimit))
			w.Header().Set("X-RateLimit-Remaining", strconv.Itoa(s.apiLimit-s.apiUsed))
			w.Header().Set("X-RateLimit-Used", strconv.Itoa(s.apiUsed))
			w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(s.apiReset.Unix(), 10))
			w.Header().Set("X-RateLimit-Resource", "core")
		}
	}
	apiLimit := s.apiLimit
	s.mu.Unlock()
	done = func() {
		s.mu.Lock()
		s.requests[idx].Status = w.status
		if charged && w.status == http.StatusNotModified && r.Header.Get("Authorization") != "" && s.apiUsed > 0 {
			s.apiUsed-- // GitHub: a conditional request answered 304 is free when authorized
		}
		s.mu.Unlock()
	}
	if stall > 0 {
		select {
		case <-time.After(stall):
		case <-r.Context().Done():
			return done, false
		}
	}
	if limit != 0 {
		if limit == http.StatusForbidden {
			allowed := 60
			if apiLimit > 0 {
				allowed = apiLimit
			}
			w.Header().Set("X-RateLimit-Limit", strconv.Itoa(allowed))
			w.Header().Set("X-RateLimit-Remaining", "0")
			w.Header().Set("X-RateLimit-Used", strconv.Itoa(allowed))
			w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
			w.Header().Set("X-RateLimit-Resource", "core")
			writeError(w, limit, "API rate limit exceeded for 127.0.0.1. (But here's the good news: Authenticated requests get a higher rate limit. Check out the documentation for more details.)")
		} else {
			w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
			writeError(w, limit, "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.")
		}
		return done, false
	}
	if fail != 0 {
		msg := http.StatusText(fail)
		s.mu.Lock()
		if s.failMessage != "" {
			msg = s.failMessage
		}
		s.mu.Unlock()
		writeError(w, fail, msg)
		return done, false
	}
	return done, true
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{
		"message":           msg,
		"documentation_url": "https://docs.github.com/rest",
		"status":            strconv.Itoa(status),
	})
}

func (s *Server) serveAPI(rw http.ResponseWriter, r *http.Request) {
	w := &statusWriter{ResponseWriter: rw}
	done, ok := s.begin(API, w, r)
	defer done()
	if !ok {
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeError(w, http.StatusMethodNotAllowed, "Method Not Allowed")
		return
	}
	if w.Header().Get("X-RateLimit-Limit") == "" {
		w.Header().Set("X-RateLimit-Limit", "60")
		w.Header().Set("X-RateLimit-Remaining", "59")
	}

	s.mu.Lock()
	token := s.token
	s.mu.Unlock()
	if token != "" && r.Header.Get("Authorization") != "Bearer "+token {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}

	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(parts) < 3 || parts[0] != "repos" {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	s.mu.Lock()
	rp := s.repos[strings.ToLower(parts[1]+"/"+parts[2])]
	s.mu.Unlock()
	if rp == nil {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	rest := parts[3:]
	switch {
	case len(rest) == 0:
		s.mu.Lock()
		body := s.repoJSON(rp)
		s.mu.Unlock()
		s.writeJSON(w, r, body)
	case len(rest) == 2 && rest[0] == "releases" && rest[1] == "latest":
		s.mu.Lock()
		rel := rp.latest()
		var body any
		if rel != nil {
			body = s.releaseJSON(rp, rel)
		}
		s.mu.Unlock()
		if rel == nil {
			writeError(w, http.StatusNotFound, "Not Found")
			return
		}
		s.writeJSON(w, r, body)
	case len(rest) >= 3 && rest[0] == "releases" && rest[1] == "tags":
		tag := strings.Join(rest[2:], "/")
		s.mu.Lock()
		rel := rp.release(tag)
		var body any
		if rel != nil && !rel.draft {
			body = s.releaseJSON(rp, rel)
		}
		s.mu.Unlock()
		if body == nil {
			writeError(w, http.StatusNotFound, "Not Found")
			return
		}
		s.writeJSON(w, r, body)
	case len(rest) == 2 && rest[0] == "attestations":
		s.serveAttestations(w, r, rp, rest[1])
	case len(rest) == 3 && rest[0] == "releases" && rest[1] == "assets":
		id, err := strconv.ParseInt(rest[2], 10, 64)
		s.mu.Lock()
		a := s.assets[id]
		if a != nil && !strings.EqualFold(a.owner+"/"+a.repo, rp.owner+"/"+rp.name) {
			a = nil
		}
		var body any
		if a != nil {
			body = s.assetJSON(a)
		}
		s.mu.Unlock()
		if err != nil || a == nil {
			writeError(w, http.StatusNotFound, "Not Found")
			return
		}
		if acceptsOctetStream(r.Header.Get("Accept")) {
			s.redirectToStorage(w, a)
			return
		}
		s.writeJSON(w, r, body)
	default:
		writeError(w, http.StatusNotFound, "Not Found")
	}
}

func acceptsOctetStream(accept string) bool {
	for _, part := range strings.Split(accept, ",") {
		mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(mt), "application/octet-stream") {
			return true
		}
	}
	return false
}

// redirectToStorage answers with a signed storage link for a, as both the API and the web host do.
func (s *Server) redirectToStorage(w http.ResponseWriter, a *asset) {
	s.mu.Lock()
	base := s.baseLocked(Storage)
	ttl := s.linkTTL
	s.mu.Unlock()
	date := strconv.FormatInt(time.Now().UnixNano(), 10)
	expires := strconv.FormatInt(int64(ttl/time.Millisecond), 10)
	q := "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=fake&X-Amz-Date=" + date + "&X-Amz-Expires=" + expires + "&X-Amz-Signature=" +
		s.sign(a.id, date, expires) + "&response-content-disposition=attachment%3B%20filename%3D" + url.QueryEscape(a.name)
	w.Header().Set("Location", base+"/objects/"+strconv.FormatInt(a.id, 10)+"?"+q)
	w.WriteHeader(http.StatusFound)
}

// sign is the signature of a storage link: the object, when it was signed (nanoseconds) and for
// how long (milliseconds; real links count seconds, which tests can't wait for).
func (s *Server) sign(id int64, date, expires string) string {
	m := hmac.New(sha256.New, s.secret)
	fmt.Fprintf(m, "%d\n%s\n%s", id, date, expires)
	return hex.EncodeToString(m.Sum(nil))
}

// LinkTTL sets how long the storage links signed from now on open; GitHub's last minutes. A
// download that outlives its link must ask the web host or the API for a fresh one.
func (s *Server) LinkTTL(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.linkTTL = d
}

// ExpireLinks makes every storage link signed so far expire now, as time does to real ones.
func (s *Server) ExpireLinks() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expiredTill = time.Now()
}

// writeJSON answers with body and an ETag, or 304 when the client already holds that ETag.
func (s *Server) writeJSON(w http.ResponseWriter, r *http.Request, body any) {
	data, err := json.Marshal(body)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	sum := sha256.Sum256(data)
	etag := `W/"` + hex.EncodeToString(sum[:16]) + `"`
	w.Header().Set("ETag", etag)
	w.Header().Set("Cache-Control", "public, max-age=60, s-maxage=60")
	for _, cand := range strings.Split(r.Header.Get("If-None-Match"), ",") {
		cand = strings.TrimSpace(cand)
		if cand == "*" || strings.TrimPrefix(cand, "W/") == strings.TrimPrefix(etag, "W/") {
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(data)
	}
}

type ownerJSON struct {
	Login string `json:"login"`
	ID    int64  `json:"id"`
	Type  string `json:"type"`
}

type repoJSON struct {
	ID         int64     `json:"id"`
	Name       string    `json:"name"`
	FullName   string    `json:"full_name"`
	Owner      ownerJSON `json:"owner"`
	Private    bool      `json:"private"`
	Visibility string    `json:"visibility"`
	URL        string    `json:"url"`
}

type assetJSON struct {
	ID                 int64   `json:"id"`
	Name               string  `json:"name"`
	Label              *string `json:"label"`
	State              string  `json:"state"`
	ContentType        string  `json:"content_type"`
	Size               int64   `json:"size"`
	Digest             *string `json:"digest"`
	URL                string  `json:"url"`
	BrowserDownloadURL string  `json:"browser_download_url"`
}

type releaseJSON struct {
	ID         int64       `json:"id"`
	TagName    string      `json:"tag_name"`
	Name       string      `json:"name"`
	Draft      bool        `json:"draft"`
	Prerelease bool        `json:"prerelease"`
	URL        string      `json:"url"`
	Assets     []assetJSON `json:"assets"`
}

func (s *Server) repoJSON(r *repo) repoJSON {
	j := repoJSON{
		ID:         r.repoID,
		Name:       r.name,
		FullName:   r.owner + "/" + r.name,
		Owner:      ownerJSON{Login: r.owner, ID: r.ownerID, Type: "Organization"},
		Visibility: "public",
		URL:        s.api.URL + "/repos/" + r.owner + "/" + r.name,
	}
	if s.token != "" {
		j.Private, j.Visibility = true, "private"
	}
	return j
}

func (s *Server) assetJSON(a *asset) assetJSON {
	j := assetJSON{
		ID:                 a.id,
		Name:               a.name,
		State:              "uploaded",
		ContentType:        a.contentType,
		Size:               a.size,
		URL:                fmt.Sprintf("%s/repos/%s/%s/releases/assets/%d", s.api.URL, a.owner, a.repo, a.id),
		BrowserDownloadURL: s.baseLocked(Web) + downloadPath(a),
	}
	if a.digest != "" {
		d := a.digest
		j.Digest = &d
	}
	return j
}

func (s *Server) releaseJSON(r *repo, rel *release) releaseJSON {
	j := releaseJSON{
		ID:         rel.id,
		TagName:    rel.tag,
		Name:       rel.tag,
		Draft:      rel.draft,
		Prerelease: rel.prerelease,
		URL:        fmt.Sprintf("%s/repos/%s/%s/releases/%d", s.api.URL, r.owner, r.name, rel.id),
		Assets:     []assetJSON{},
	}
	for _, a := range rel.assets {
		j.Assets = append(j.Assets, s.assetJSON(a))
	}
	return j
}

// downloadPath is where the web host serves a: /{owner}/{repo}/releases/download/{tag}/{name}.
func downloadPath(a *asset) string {
	var b strings.Builder
	b.WriteString("/" + url.PathEscape(a.owner) + "/" + url.PathEscape(a.repo) + "/releases/download")
	for _, seg := range strings.Split(a.tag, "/") {
		b.WriteString("/" + url.PathEscape(seg))
	}
	b.WriteString("/" + url.PathEscape(a.name))
	return b.String()
}

func (s *Server) serveWeb(rw http.ResponseWriter, r *http.Request) {
	w := &statusWriter{ResponseWriter: rw}
	done, ok := s.begin(Web, w, r)
	defer done()
	if !ok {
		return
	}
	// Only the API may ever see GITHUB_TOKEN; github.com's download links need none.
	if r.Header.Get("Authorization") != "" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte("githubtest: a credential reached the web host; only the API may see GITHUB_TOKEN\n"))
		return
	}
	notFound := func() {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte("<!DOCTYPE html><html><title>Page not found · GitHub</title></html>"))
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if (r.Method != http.MethodGet && r.Method != http.MethodHead) || len(parts) < 6 || parts[2] != "releases" || parts[3] != "download" {
		notFound()
		return
	}
	tag, name := strings.Join(parts[4:len(parts)-1], "/"), parts[len(parts)-1]
	s.mu.Lock()
	var found *asset
	if rp := s.repos[strings.ToLower(parts[0]+"/"+parts[1])]; rp != nil && s.token == "" {
		if rel := rp.release(tag); rel != nil && !rel.draft {
			for _, a := range rel.assets {
				if a.name == name {
					found = a
				}
			}
		}
	}
	s.mu.Unlock()
	if found == nil {
		notFound()
		return
	}
	s.redirectToStorage(w, found)
}

func (s *Server) serveStorage(rw http.ResponseWriter, r *http.Request) {
	w := &statusWriter{ResponseWriter: rw}
	done, ok := s.begin(Storage, w, r)
	defer done()
	if !ok {
		return
	}
	// Real release storage is a pre-signed S3-style URL: a second credential is an error.
	if r.Header.Get("Authorization") != "" {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>InvalidArgument</Code>` +
			`<Message>Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter, Signature query string parameter or the Authorization header should be specified</Message></Error>`))
		return
	}
	if rest, isBundle := strings.CutPrefix(r.URL.Path, "/attestations/"); isBundle {
		s.serveAttestationBundle(w, r, rest)
		return
	}
	idText, ok := strings.CutPrefix(r.URL.Path, "/objects/")
	id, err := strconv.ParseInt(idText, 10, 64)
	q := r.URL.Query()
	date, expires := q.Get("X-Amz-Date"), q.Get("X-Amz-Expires")
	if !ok || err != nil || !hmac.Equal([]byte(q.Get("X-Amz-Signature")), []byte(s.sign(id, date, expires))) {
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>SignatureDoesNotMatch</Code></Error>`))
		return
	}
	signedAt, _ := strconv.ParseInt(date, 10, 64)
	ttl, _ := strconv.ParseInt(expires, 10, 64)
	s.mu.Lock()
	a := s.assets[id]
	var data []byte
	var etag string
	if a != nil {
		data = a.data
		sum := sha256.Sum256(data)
		etag = `"` + hex.EncodeToString(sum[:16]) + `"`
	}
	stallBody := s.stallBody
	expired := time.Unix(0, signedAt).Add(time.Duration(ttl)*time.Millisecond).Before(time.Now()) || !time.Unix(0, signedAt).After(s.expiredTill)
	s.mu.Unlock()
	if expired {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>`))
		return
	}
	if a == nil {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("ETag", etag)
	w.Header().Set("Accept-Ranges", "bytes")
	// Storage honours one range, as S3 and Azure do; If-Range with another ETag gets the whole
	// new object.
	status := http.StatusOK
	if start, end, ok := parseRange(r.Header.Get("Range"), int64(len(data))); ok && (r.Header.Get("If-Range") == "" || r.Header.Get("If-Range") == etag) {
		if start < 0 {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", len(data)))
			w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
			return
		}
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, end, len(data)))
		data, status = data[start:end+1], http.StatusPartialContent
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	if stallBody > 0 {
		half := len(data) / 2
		_, _ = w.Write(data[:half])
		w.Flush()
		select {
		case <-time.After(stallBody):
		case <-r.Context().Done():
			return
		}
		data = data[half:]
	}
	_, _ = w.Write(data)
}

// parseRange reads a single byte range, "bytes=a-b", "bytes=a-" or "bytes=-n", against an object
// of size bytes. ok is false for no range or a form storage ignores (several ranges); start is
// -1 for a range that lies outside the object.
func parseRange(h string, size int64) (start, end int64, ok bool) {
	spec, found := strings.CutPrefix(strings.TrimSpace(h), "bytes=")
	if !found || strings.Contains(spec, ",") {
		return 0, 0, false
	}
	a, b, found := strings.Cut(spec, "-")
	if !found {
		return 0, 0, false
	}
	var err error
	switch {
	case a == "":
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n <= 0 {
			return 0, 0, false
		}
		return max(size-n, 0), size - 1, true
	default:
		if start, err = strconv.ParseInt(a, 10, 64); err != nil || start < 0 {
			return 0, 0, false
		}
		end = size - 1
		if b != "" {
			if end, err = strconv.ParseInt(b, 10, 64); err != nil || end < start {
				return 0, 0, false
			}
			end = min(end, size-1)
		}
	}
	if start >= size {
		return -1, -1, true
	}
	return start, end, true
}
