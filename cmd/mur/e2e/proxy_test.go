package e2e

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"
)

// throttle puts a reverse proxy in front of a registry that slows blob bodies to about
// bytesPerSec, so that a test can kill a pull in the middle of it.
func throttle(t *testing.T, target string, bytesPerSec int) string {
	t.Helper()
	u, err := url.Parse("http://" + target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1
	rp.ModifyResponse = func(r *http.Response) error {
		if strings.Contains(r.Request.URL.Path, "/blobs/") {
			r.Body = &slowBody{r: r.Body, rate: bytesPerSec}
		}
		return nil
	}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

type slowBody struct {
	r    io.ReadCloser
	rate int
}

func (s *slowBody) Read(p []byte) (int, error) {
	const chunk = 64 << 10
	if len(p) > chunk {
		p = p[:chunk]
	}
	n, err := s.r.Read(p)
	time.Sleep(time.Duration(float64(n) / float64(s.rate) * float64(time.Second)))
	return n, err
}

func (s *slowBody) Close() error { return s.r.Close() }
