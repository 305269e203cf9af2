package ocistore

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/ref"
)

func TestHTTPSOnlyForOtherHosts(t *testing.T) {
	var seen []string
	rt := &httpsOnlyTransport{host: "10.0.0.5:5000", inner: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		seen = append(seen, r.URL.String())
		return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
	})}
	for _, u := range []string{"http://10.0.0.5:5000/v2/", "http://127.0.0.1:5000/v2/", "http://storage.example/blob"} {
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		rt.RoundTrip(req)
	}
	want := []string{"https://10.0.0.5:5000/v2/", "http://127.0.0.1:5000/v2/", "http://storage.example/blob"}
	for i := range want {
		if seen[i] != want[i] {
			t.Errorf("request %d went to %s, want %s", i, seen[i], want[i])
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Whatever asks, credentials go over plain HTTP only to the registry itself.
func TestNoCredentialsInTheClearElsewhere(t *testing.T) {
	sent := 0
	rt := &credentialGuard{host: "127.0.0.1:5000", inner: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		sent++
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody}, nil
	})}
	basic := func(u string) *http.Request {
		r, _ := http.NewRequest(http.MethodGet, u, nil)
		r.Header.Set("Authorization", "Basic YWxpY2U6czNjcmV0")
		return r
	}
	form, _ := http.NewRequest(http.MethodPost, "http://localhost:5001/token", strings.NewReader("password=s3cret"))
	form.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for _, r := range []*http.Request{basic("http://localhost:5001/token"), basic("http://127.0.0.1:5001/token"), form} {
		if _, err := rt.RoundTrip(r); !errors.Is(err, errs.Denied) {
			t.Errorf("%s %s with credentials: %v, want a refusal", r.Method, r.URL, err)
		}
	}
	if sent != 0 {
		t.Fatalf("%d requests with credentials went out in the clear", sent)
	}
	for _, u := range []string{"http://127.0.0.1:5000/v2/", "https://auth.example/token"} {
		if _, err := rt.RoundTrip(basic(u)); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
	plain, _ := http.NewRequest(http.MethodGet, "http://localhost:5001/blob", nil)
	if _, err := rt.RoundTrip(plain); err != nil || sent != 3 {
		t.Errorf("a request without credentials to another host: %v", err)
	}
}

// Referrer tags (sha256-<hex>, cosign's .sig and .att) are never versions, and latest never
// suggests one.
func TestLatestIgnoresReferrerTags(t *testing.T) {
	ref64 := "sha256-" + strings.Repeat("ab", 32)
	grep := ref.Name{Scope: "acme", Name: "grep"}
	if got, err := latestTag("store", grep, []string{ref64, "1.0.0", ref64 + ".sig", "0.9.0"}); err != nil || got != "1.0.0" {
		t.Fatalf("latest = %q, %v", got, err)
	}
	_, err := latestTag("store", grep, []string{ref64 + ".sig", "nightly", ref64})
	if !errors.Is(err, errs.Usage) || strings.Contains(err.Error(), "sha256-") || !strings.Contains(err.Error(), "acme/grep@nightly") {
		t.Fatalf("latest among nightly and referrer tags: %v", err)
	}
	if _, err := latestTag("store", grep, []string{ref64, ref64 + ".att"}); !errors.Is(err, errs.NotFound) {
		t.Fatalf("latest among referrer tags only: %v, want not-found", err)
	}
}

// The '+'/'_' explanation is given only when a '+' is involved.
func TestSharedTagSaysWhy(t *testing.T) {
	if s := sharedTag("1.0.0+build", "1.0.0_build"); !strings.Contains(s, "'+' is stored as '_'") {
		t.Errorf("with a '+': %q", s)
	}
	if s := sharedTag("1.0.0", "2.0.0"); strings.Contains(s, "'+'") {
		t.Errorf("without a '+': %q", s)
	}
}
