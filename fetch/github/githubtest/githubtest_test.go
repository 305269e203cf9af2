package githubtest

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// noRedirect is a client that shows redirects instead of following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func get(t *testing.T, url string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

func TestFakeServesReleasesAsGitHubDoes(t *testing.T) {
	s := New(t)
	s.AddRepo("acme", "tools", 11, 22)
	s.AddRelease("acme", "tools", "v1", map[string][]byte{"a.txt": []byte("one")})
	s.AddPrerelease("acme", "tools", "v2-rc", nil)
	s.AddDraftRelease("acme", "tools", "v3-draft", nil)

	resp, body := get(t, s.APIURL()+"/repos/acme/tools", nil)
	var repo struct {
		ID       int64  `json:"id"`
		FullName string `json:"full_name"`
		Owner    struct {
			Login string `json:"login"`
			ID    int64  `json:"id"`
		} `json:"owner"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(body, &repo) != nil || repo.ID != 22 || repo.Owner.ID != 11 || repo.FullName != "acme/tools" {
		t.Fatalf("repo: %d %s", resp.StatusCode, body)
	}

	resp, body = get(t, s.APIURL()+"/repos/acme/tools/releases/latest", nil)
	var rel struct {
		TagName string `json:"tag_name"`
		Assets  []struct {
			ID     int64  `json:"id"`
			Digest string `json:"digest"`
			Size   int64  `json:"size"`
		} `json:"assets"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(body, &rel) != nil || rel.TagName != "v1" || len(rel.Assets) != 1 || rel.Assets[0].Size != 3 ||
		rel.Assets[0].Digest != "sha256:7692c3ad3540bb803c020b3aee66cd8887123234ea0c6e7143c0add73ff431ed" {
		t.Fatalf("latest: %d %s", resp.StatusCode, body)
	}
	if resp, _ := get(t, s.APIURL()+"/repos/acme/tools/releases/tags/v2-rc", nil); resp.StatusCode != 200 {
		t.Fatalf("prerelease by tag: %d", resp.StatusCode)
	}
	resp, body = get(t, s.APIURL()+"/repos/acme/tools/releases/tags/v3-draft", nil)
	var e struct {
		Message string `json:"message"`
		Doc     string `json:"documentation_url"`
	}
	if resp.StatusCode != 404 || json.Unmarshal(body, &e) != nil || e.Message != "Not Found" || e.Doc == "" {
		t.Fatalf("draft by tag: %d %s", resp.StatusCode, body)
	}

	// ETags.
	resp, _ = get(t, s.APIURL()+"/repos/acme/tools", nil)
	etag := resp.Header.Get("ETag")
	if resp, _ := get(t, s.APIURL()+"/repos/acme/tools", map[string]string{"If-None-Match": etag}); resp.StatusCode != 304 {
		t.Fatalf("revalidation: %d", resp.StatusCode)
	}
	s.SetOwnerID("acme", "tools", 99)
	if resp, _ := get(t, s.APIURL()+"/repos/acme/tools", map[string]string{"If-None-Match": etag}); resp.StatusCode != 200 {
		t.Fatalf("revalidation after a change: %d", resp.StatusCode)
	}

	// Asset: JSON without the octet-stream Accept, a redirect to storage with it.
	assetURL := s.APIURL() + "/repos/acme/tools/releases/assets/" + strconv.FormatInt(rel.Assets[0].ID, 10)
	if resp, body := get(t, assetURL, nil); resp.StatusCode != 200 || !strings.Contains(string(body), `"name":"a.txt"`) {
		t.Fatalf("asset JSON: %d %s", resp.StatusCode, body)
	}
	resp, _ = get(t, assetURL, map[string]string{"Accept": "application/octet-stream"})
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusFound || !strings.HasPrefix(loc, s.StorageURL()+"/objects/") || !strings.Contains(loc, "X-Amz-Signature=") {
		t.Fatalf("asset download: %d %q", resp.StatusCode, loc)
	}
	if resp, body := get(t, loc, nil); resp.StatusCode != 200 || string(body) != "one" {
		t.Fatalf("storage: %d %q", resp.StatusCode, body)
	}
	if resp, _ := get(t, loc, map[string]string{"Authorization": "Bearer x"}); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("storage with credentials: %d", resp.StatusCode)
	}
	if resp, _ := get(t, strings.Replace(loc, "X-Amz-Signature=", "X-Amz-Signature=0", 1), nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("storage with a bad signature: %d", resp.StatusCode)
	}

	if n := s.Count(Storage, ""); n != 3 {
		t.Fatalf("storage count %d", n)
	}
	reqs := s.Requests()
	if last := reqs[len(reqs)-1]; last.Server != Storage || last.Status != http.StatusForbidden {
		t.Fatalf("last request %+v", last)
	}
}

func TestFakeMisbehaves(t *testing.T) {
	s := New(t)
	s.AddRepo("acme", "tools", 11, 22)
	url := s.APIURL() + "/repos/acme/tools"

	s.FailNext(2, 503)
	for i, want := range []int{503, 503, 200} {
		if resp, _ := get(t, url, nil); resp.StatusCode != want {
			t.Fatalf("request %d: %d, want %d", i, resp.StatusCode, want)
		}
	}
	s.AlwaysFail(500)
	for range 3 {
		if resp, _ := get(t, url, nil); resp.StatusCode != 500 {
			t.Fatalf("always-fail: %d", resp.StatusCode)
		}
	}
	s.Behave()

	reset := time.Now().Add(time.Hour)
	s.RateLimitPrimary(reset)
	resp, _ := get(t, url, nil)
	if resp.StatusCode != 403 || resp.Header.Get("X-RateLimit-Remaining") != "0" || resp.Header.Get("X-RateLimit-Reset") != strconv.FormatInt(reset.Unix(), 10) {
		t.Fatalf("primary limit: %d %v", resp.StatusCode, resp.Header)
	}
	s.RateLimitSecondary(7)
	if resp, _ := get(t, url, nil); resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "7" {
		t.Fatalf("secondary limit: %d %v", resp.StatusCode, resp.Header)
	}
	s.Behave()

	s.Stall(150 * time.Millisecond)
	start := time.Now()
	if resp, _ := get(t, url, nil); resp.StatusCode != 200 || time.Since(start) < 150*time.Millisecond {
		t.Fatalf("stall: %d after %s", resp.StatusCode, time.Since(start))
	}
}

func TestFakeWebHostServesDownloadLinks(t *testing.T) {
	s := New(t)
	s.AddRepo("acme", "tools", 11, 22)
	s.AddRelease("acme", "tools", "v1", map[string][]byte{"a.txt": []byte("one")})
	s.AddDraftRelease("acme", "tools", "v2-draft", map[string][]byte{"b.txt": []byte("two")})

	_, body := get(t, s.APIURL()+"/repos/acme/tools/releases/latest", nil)
	var rel struct {
		Assets []struct {
			BrowserDownloadURL string `json:"browser_download_url"`
		} `json:"assets"`
	}
	if json.Unmarshal(body, &rel) != nil || len(rel.Assets) != 1 {
		t.Fatalf("latest: %s", body)
	}
	link := rel.Assets[0].BrowserDownloadURL
	if link != s.WebURL()+"/acme/tools/releases/download/v1/a.txt" {
		t.Fatalf("browser_download_url = %s", link)
	}
	resp, _ := get(t, link, nil)
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusFound || !strings.HasPrefix(loc, s.StorageURL()+"/objects/") || !strings.Contains(loc, "X-Amz-Signature=") {
		t.Fatalf("web download: %d %q", resp.StatusCode, loc)
	}
	if resp, body := get(t, loc, nil); resp.StatusCode != 200 || string(body) != "one" {
		t.Fatalf("storage: %d %q", resp.StatusCode, body)
	}
	if resp, _ := get(t, link, map[string]string{"Authorization": "Bearer x"}); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("web host with a credential: %d", resp.StatusCode)
	}
	for _, p := range []string{"/acme/tools/releases/download/v2-draft/b.txt", "/acme/tools/releases/download/v1/nope", "/acme/tools/releases/v1/a.txt", "/acme/other/releases/download/v1/a.txt"} {
		if resp, _ := get(t, s.WebURL()+p, nil); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", p, resp.StatusCode)
		}
	}
	c := s.Counts()
	if c.API != 1 || c.APIDownloads != 0 || c.Web != 6 || c.Storage != 1 {
		t.Fatalf("counts %+v", c)
	}

	// The API download is an API call, and a download.
	id := s.AssetID("acme", "tools", "v1", "a.txt")
	get(t, s.APIURL()+"/repos/acme/tools/releases/assets/"+strconv.FormatInt(id, 10), map[string]string{"Accept": "application/octet-stream"})
	get(t, s.APIURL()+"/repos/acme/tools/releases/assets/"+strconv.FormatInt(id, 10), nil)
	if c := s.Counts(); c.API != 3 || c.APIDownloads != 1 {
		t.Fatalf("counts after API asset requests %+v", c)
	}

	// Links can be sent through proxies.
	s.AdvertiseVia(Web, "http://127.0.0.1:1/")
	s.AdvertiseVia(Storage, "http://127.0.0.1:2")
	_, body = get(t, s.APIURL()+"/repos/acme/tools/releases/latest", nil)
	if json.Unmarshal(body, &rel) != nil || rel.Assets[0].BrowserDownloadURL != "http://127.0.0.1:1/acme/tools/releases/download/v1/a.txt" {
		t.Fatalf("advertised via a proxy: %s", body)
	}
	if resp, _ := get(t, link, nil); !strings.HasPrefix(resp.Header.Get("Location"), "http://127.0.0.1:2/objects/") {
		t.Fatalf("storage via a proxy: %q", resp.Header.Get("Location"))
	}
	s.AdvertiseVia(Storage, "")

	// One server fails while the others work.
	s.FailServer(Web, 503)
	if resp, _ := get(t, link, nil); resp.StatusCode != 503 {
		t.Fatalf("failed web host: %d", resp.StatusCode)
	}
	if resp, _ := get(t, s.APIURL()+"/repos/acme/tools", nil); resp.StatusCode != 200 {
		t.Fatalf("API while the web host fails: %d", resp.StatusCode)
	}
	s.Behave()

	// A private repository: the API says so, and its links are 404 to anyone.
	s.RequireToken("t0k")
	if resp, _ := get(t, link, nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("private repository's link: %d", resp.StatusCode)
	}
	_, body = get(t, s.APIURL()+"/repos/acme/tools", map[string]string{"Authorization": "Bearer t0k"})
	var repo struct {
		Private    bool   `json:"private"`
		Visibility string `json:"visibility"`
	}
	if json.Unmarshal(body, &repo) != nil || !repo.Private || repo.Visibility != "private" {
		t.Fatalf("private repository: %s", body)
	}
}

func TestFakeAPIRateLimit(t *testing.T) {
	s := New(t)
	s.AddRepo("acme", "tools", 11, 22)
	s.AddRelease("acme", "tools", "v1", map[string][]byte{"a.txt": []byte("one")})
	s.LimitAPI(3)
	url := s.APIURL() + "/repos/acme/tools"
	start := time.Now()
	for i, remaining := range []string{"2", "1", "0"} {
		resp, _ := get(t, url, nil)
		if resp.StatusCode != 200 || resp.Header.Get("X-RateLimit-Limit") != "3" || resp.Header.Get("X-RateLimit-Remaining") != remaining {
			t.Fatalf("call %d: %d %v", i+1, resp.StatusCode, resp.Header)
		}
	}
	resp, body := get(t, url, nil)
	reset, _ := strconv.ParseInt(resp.Header.Get("X-RateLimit-Reset"), 10, 64)
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-RateLimit-Remaining") != "0" || !strings.Contains(string(body), "API rate limit exceeded") ||
		reset < start.Add(time.Hour).Unix()-1 || reset > time.Now().Add(time.Hour).Unix()+1 {
		t.Fatalf("call 4: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	// Download links and storage spend no API quota.
	if resp, _ := get(t, s.WebURL()+"/acme/tools/releases/download/v1/a.txt", nil); resp.StatusCode != http.StatusFound {
		t.Fatalf("web host while the API is exhausted: %d", resp.StatusCode)
	}

	// A 304 is free with a token, as GitHub documents, and costs a call without.
	s.LimitAPI(2)
	resp, _ = get(t, url, nil)
	etag := resp.Header.Get("ETag")
	resp, _ = get(t, url, map[string]string{"If-None-Match": etag, "Authorization": "Bearer x"})
	if resp.StatusCode != http.StatusNotModified {
		t.Fatalf("revalidation: %d", resp.StatusCode)
	}
	if resp, _ := get(t, url, map[string]string{"If-None-Match": etag}); resp.StatusCode != http.StatusNotModified || resp.Header.Get("X-RateLimit-Remaining") != "0" {
		t.Fatalf("the authorized 304 was charged: %d %v", resp.StatusCode, resp.Header)
	}
	if resp, _ := get(t, url, nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("the anonymous 304 was free: %d", resp.StatusCode)
	}
	s.LimitAPI(0)
	if resp, _ := get(t, url, nil); resp.StatusCode != 200 {
		t.Fatalf("without a limit: %d", resp.StatusCode)
	}
}

// Storage honours one Range and If-Range against its ETag, as S3 and Azure do, and its links
// expire.
func TestFakeStorageRangesAndExpiry(t *testing.T) {
	s := New(t)
	s.AddRepo("acme", "tools", 11, 22)
	s.AddRelease("acme", "tools", "v1", map[string][]byte{"a.bin": []byte("0123456789")})
	link := func() string {
		resp, _ := get(t, s.WebURL()+"/acme/tools/releases/download/v1/a.bin", nil)
		return resp.Header.Get("Location")
	}
	loc := link()
	resp, body := get(t, loc, nil)
	etag := resp.Header.Get("ETag")
	if resp.StatusCode != 200 || string(body) != "0123456789" || etag == "" || resp.Header.Get("Accept-Ranges") != "bytes" {
		t.Fatalf("whole: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	for _, c := range []struct {
		rng, ifRange string
		status       int
		body, cr     string
	}{
		{"bytes=2-4", "", 206, "234", "bytes 2-4/10"},
		{"bytes=7-", "", 206, "789", "bytes 7-9/10"},
		{"bytes=-2", "", 206, "89", "bytes 8-9/10"},
		{"bytes=5-100", "", 206, "56789", "bytes 5-9/10"},
		{"bytes=2-4", etag, 206, "234", "bytes 2-4/10"},
		{"bytes=2-4", `"other"`, 200, "0123456789", ""},
		{"bytes=0-1,4-5", "", 200, "0123456789", ""},
		{"bytes=10-12", "", 416, "", "bytes */10"},
	} {
		hdr := map[string]string{"Range": c.rng}
		if c.ifRange != "" {
			hdr["If-Range"] = c.ifRange
		}
		resp, body := get(t, loc, hdr)
		if resp.StatusCode != c.status || string(body) != c.body || resp.Header.Get("Content-Range") != c.cr {
			t.Errorf("%s (If-Range %s): %d %q %q", c.rng, c.ifRange, resp.StatusCode, body, resp.Header.Get("Content-Range"))
		}
	}
	// New bytes, a new ETag: If-Range with the old one gets the whole new object.
	s.ReplaceAssetBytes("acme", "tools", "v1", "a.bin", []byte("abcdefghij"), false)
	if resp, body := get(t, loc, map[string]string{"Range": "bytes=2-4", "If-Range": etag}); resp.StatusCode != 200 || string(body) != "abcdefghij" {
		t.Fatalf("after a change: %d %q", resp.StatusCode, body)
	}
	// Expiry: ExpireLinks ends every link so far; a fresh redirect opens.
	s.ExpireLinks()
	if resp, body := get(t, loc, nil); resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "Request has expired") {
		t.Fatalf("an expired link: %d %q", resp.StatusCode, body)
	}
	if resp, _ := get(t, link(), nil); resp.StatusCode != 200 {
		t.Fatalf("a fresh link: %d", resp.StatusCode)
	}
	s.LinkTTL(50 * time.Millisecond)
	loc = link()
	time.Sleep(100 * time.Millisecond)
	if resp, _ := get(t, loc, nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a link past its TTL: %d", resp.StatusCode)
	}
	// The expiry is signed: stretching it breaks the signature.
	loc = link()
	if resp, _ := get(t, strings.Replace(loc, "X-Amz-Expires=50", "X-Amz-Expires=5000000", 1), nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a stretched link: %d", resp.StatusCode)
	}
}
