package ocistore

import (
	"net/http"
	"testing"
	"time"
)

func TestHighestSemver(t *testing.T) {
	cases := []struct {
		in   []string
		want string
		ok   bool
	}{
		{[]string{"1.2.0", "1.10.0", "1.9.0"}, "1.10.0", true},
		{[]string{"1.0.0-rc.1", "1.0.0"}, "1.0.0", true},
		{[]string{"1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1"}, "1.0.0-rc.1", true},
		{[]string{"1.0.0-beta.11", "1.0.0-beta.2"}, "1.0.0-beta.11", true},
		{[]string{"1.0.0-2", "1.0.0-10", "1.0.0-a"}, "1.0.0-a", true},
		{[]string{"1.0.0+build.1", "1.0.0+build.2"}, "1.0.0+build.1", true},
		{[]string{"99999999999999999999.0.0", "9.0.0"}, "99999999999999999999.0.0", true},
		{[]string{"v1.0.0", "1.0", "01.0.0", "1.0.0-01", "1.0.0-", "1.0.0+", "1..0", "latest"}, "", false},
		{[]string{"v2.0.0", "0.1.0"}, "0.1.0", true},
		{nil, "", false},
	}
	for _, c := range cases {
		got, ok := highestSemver(c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("highestSemver(%q) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestTagMapping(t *testing.T) {
	if got := tagFromVersion("1.2.0+build.7"); got != "1.2.0_build.7" {
		t.Errorf("tagFromVersion = %q", got)
	}
	if got := versionFromTag("1.2.0_build.7"); got != "1.2.0+build.7" {
		t.Errorf("versionFromTag = %q", got)
	}
}

func TestRetryAfter(t *testing.T) {
	if d, ok := retryAfter("3"); !ok || d != 3*time.Second {
		t.Errorf("seconds: %v %v", d, ok)
	}
	at := time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)
	if d, ok := retryAfter(at); !ok || d < 59*time.Minute || d > time.Hour {
		t.Errorf("date: %v %v", d, ok)
	}
	for _, h := range []string{"", "-1", "soon"} {
		if _, ok := retryAfter(h); ok {
			t.Errorf("retryAfter(%q) parsed", h)
		}
	}
}

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
