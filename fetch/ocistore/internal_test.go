package ocistore

import (
	"net/http"
	"testing"
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
