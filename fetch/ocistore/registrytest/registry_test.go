package registrytest

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

func get(t *testing.T, url string) (int, error) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

func TestStart(t *testing.T) {
	r := Start(t)
	if code, err := get(t, r.URL()+"/v2/"); err != nil || code != http.StatusOK {
		t.Fatalf("GET /v2/ = %d, %v", code, err)
	}
	if code, _ := get(t, r.URL()+"/v2/acme/grep/tags/list"); code != http.StatusNotFound {
		t.Fatalf("tags of an empty registry: HTTP %d, want 404", code)
	}
	r.Stop()
	r.Stop()
	if _, err := get(t, r.URL()+"/v2/"); err == nil {
		t.Fatal("the registry still answers after Stop")
	}
}

func TestStartInProcess(t *testing.T) {
	var seen []string
	r := StartInProcess(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			seen = append(seen, req.URL.Path)
			if strings.HasSuffix(req.URL.Path, "/fail") {
				http.Error(w, "injected", http.StatusTeapot)
				return
			}
			next.ServeHTTP(w, req)
		})
	})
	if code, err := get(t, r.URL()+"/v2/"); err != nil || code != http.StatusOK {
		t.Fatalf("GET /v2/ = %d, %v", code, err)
	}
	if code, _ := get(t, r.URL()+"/v2/x/fail"); code != http.StatusTeapot {
		t.Fatalf("the middleware did not run: HTTP %d", code)
	}
	if len(seen) != 2 {
		t.Fatalf("middleware saw %v", seen)
	}
}

// recorder stands in for a test, to see whether an unavailable registry skips or fails.
type recorder struct {
	testing.TB
	fatal, skip string
}

func (r *recorder) Helper()           {}
func (r *recorder) Fatal(args ...any) { r.fatal = fmt.Sprint(args...) }
func (r *recorder) Skip(args ...any)  { r.skip = fmt.Sprint(args...) }
func (r *recorder) TempDir() string   { return r.TB.TempDir() }
func (r *recorder) Cleanup(f func())  { r.TB.Cleanup(f) }

func TestUnavailable(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-registry")
	for _, ci := range []string{"", "true"} {
		t.Setenv("CI", ci)
		rec := &recorder{TB: t}
		if r := start(rec, missing); r != nil {
			t.Fatal("start returned a registry for a missing binary")
		}
		got := rec.skip
		if ci != "" {
			got = rec.fatal
			if rec.skip != "" {
				t.Fatalf("with CI set, a missing registry skipped: %s", rec.skip)
			}
		} else if rec.fatal != "" {
			t.Fatalf("without CI, a missing registry failed: %s", rec.fatal)
		}
		if !strings.Contains(got, "apt-get install docker-registry") || !strings.Contains(got, missing) {
			t.Fatalf("CI=%q: message %q", ci, got)
		}
	}
}
