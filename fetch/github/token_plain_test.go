package github

import (
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
)

// The token travels to the API host only over the API base's own scheme: with an https base,
// the same host reached over plain http is not the API base (issue 22, item 17).
func TestTokenNeverRidesPlainHTTPToTheAPIHost(t *testing.T) {
	c := NewClient(ClientOptions{BaseURL: "https://api.test", Token: "t0ken", Retries: -1})
	for _, u := range []string{"http://api.test/repos/o/r", "http://api.test:443/repos/o/r", "http://API.test/"} {
		pu, _ := url.Parse(u)
		if c.onAPIBase(pu) {
			t.Errorf("%s counts as the https API base: the token would ride plain http", u)
		}
	}
	if pu, _ := url.Parse("https://api.test/repos/o/r"); !c.onAPIBase(pu) {
		t.Fatal("the API base itself is not the API base")
	}

	// End to end, as a hostile release would try it: api.test answers https (the API) and plain
	// http (the attacker's listener); the asset's link and a redirect both point at plain http
	// on the API's host. No request, and so no token, reaches the plain listener.
	var mu sync.Mutex
	var plainAuth []string
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		plainAuth = append(plainAuth, r.Header.Get("Authorization"))
		mu.Unlock()
		_, _ = w.Write([]byte("payload"))
	}))
	defer plain.Close()
	redirect, apiHits := false, 0
	api := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		apiHits++
		if redirect {
			http.Redirect(w, r, "http://api.test/storage/9", http.StatusFound)
			return
		}
		_, _ = w.Write([]byte("payload"))
	}))
	defer api.Close()
	tr := api.Client().Transport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: tr.TLSClientConfig.RootCAs, ServerName: "example.com"}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		to := plain.Listener.Addr().String()
		if _, port, _ := net.SplitHostPort(addr); port == "443" {
			to = api.Listener.Addr().String()
		}
		return (&net.Dialer{}).DialContext(ctx, network, to)
	}
	c = NewClient(ClientOptions{BaseURL: "https://api.test", Token: "t0ken", HTTPClient: &http.Client{Transport: tr}, Retries: -1})
	a := Asset{ID: 9, Name: "a", Size: 7, BrowserDownloadURL: "http://api.test/o/r/releases/download/v1/a"}
	for _, r := range []bool{false, true} {
		for _, private := range []bool{false, true} {
			redirect = r
			_, _ = c.DownloadAsset(context.Background(), "o", "r", a, private, 7, &bytes.Buffer{})
		}
	}
	if apiHits == 0 {
		t.Fatal("the API over https was never reached: the test's dialer is broken")
	}
	mu.Lock()
	defer mu.Unlock()
	for _, auth := range plainAuth {
		if auth != "" {
			t.Fatalf("the token reached plain http on the API's host: %q", auth)
		}
	}
	if len(plainAuth) != 0 {
		t.Fatalf("%d requests reached plain http on the API's host", len(plainAuth))
	}
}
