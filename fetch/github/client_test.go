package github

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

// A GitHub Enterprise host may answer an asset download with the bytes themselves, and GitHub
// answers a renamed repository with a redirect on the API host, where the token still belongs.
func TestDirectDownloadsAndRedirectsOnTheAPIHost(t *testing.T) {
	var sawAuth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sawAuth = append(sawAuth, r.URL.Path+" "+r.Header.Get("Authorization"))
		switch r.URL.Path {
		case "/repos/old/x":
			http.Redirect(w, r, "/repositories/5", http.StatusMovedPermanently)
		case "/repositories/5":
			_, _ = w.Write([]byte(`{"id":5,"full_name":"new/x","owner":{"login":"new","id":6}}`))
		case "/repos/new/x/releases/assets/9":
			if r.Header.Get("Accept") != "application/octet-stream" {
				http.Error(w, "want octet-stream", http.StatusUnsupportedMediaType)
				return
			}
			_, _ = w.Write([]byte("payload"))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	c := NewClient(ClientOptions{BaseURL: srv.URL, Token: "tok"})
	r, err := c.Repo(context.Background(), "old", "x")
	if err != nil || r.ID != 5 || r.Owner.ID != 6 {
		t.Fatalf("renamed repository: %+v, %v", r, err)
	}
	var buf bytes.Buffer
	if n, err := c.DownloadAsset(context.Background(), "new", "x", Asset{ID: 9}, false, 100, &buf); err != nil || n != 7 || buf.String() != "payload" {
		t.Fatalf("direct download: %d %q %v", n, buf.String(), err)
	}
	want := []string{"/repos/old/x Bearer tok", "/repositories/5 Bearer tok", "/repos/new/x/releases/assets/9 Bearer tok"}
	if len(sawAuth) != len(want) {
		t.Fatalf("requests: %q", sawAuth)
	}
	for i := range want {
		if sawAuth[i] != want[i] {
			t.Fatalf("requests: %q, want %q", sawAuth, want)
		}
	}
}
