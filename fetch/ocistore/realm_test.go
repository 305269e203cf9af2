package ocistore_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
	"github.com/murmur-nexus/mur/internal/ref"
)

// staticKeychain hands out one docker-config login for every registry.
type staticKeychain struct{}

func (staticKeychain) Resolve(authn.Resource) (authn.Authenticator, error) {
	return &authn.Basic{Username: "alice", Password: "s3cret"}, nil
}

// tokenServer records who asked it for a token, and with which credentials.
type tokenServer struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string
}

func startTokenServer(t *testing.T) *tokenServer {
	ts := &tokenServer{}
	ts.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ts.mu.Lock()
		ts.seen = append(ts.seen, r.Method+" "+r.URL.Path+" auth="+r.Header.Get("Authorization"))
		ts.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"token":"t","access_token":"t"}`))
	}))
	t.Cleanup(ts.Close)
	return ts
}

func (ts *tokenServer) requests() []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]string(nil), ts.seen...)
}

// challengingRegistry answers everything with a Bearer challenge naming realm, except the token
// path, which it serves itself.
func challengingRegistry(t *testing.T, realm func(self string) string, tokens *tokenServer) *httptest.Server {
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/token" {
			tokens.Config.Handler.ServeHTTP(w, r)
			return
		}
		if r.Header.Get("Authorization") == "Bearer t" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="`+realm(srv.Listener.Addr().String())+`",service="registry"`)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// A token realm on another loopback port, over plain HTTP, is refused before any credential is
// sent there; a realm on the registry's own loopback address is used.
func TestPlainRealmElsewhereGetsNoCredentials(t *testing.T) {
	grep := ref.Name{Scope: "acme", Name: "grep"}
	for _, c := range []struct {
		realmHost string
		plainHTTP bool // the store chosen plain HTTP: the realm must still be HTTPS
	}{{"localhost", false}, {"127.0.0.1", false}, {"localhost", true}} {
		realmHost := c.realmHost
		t.Run(fmt.Sprintf("%s plain-http=%v", realmHost, c.plainHTTP), func(t *testing.T) {
			tokens := startTokenServer(t)
			port := tokens.Listener.Addr().String()[strings.LastIndex(tokens.Listener.Addr().String(), ":"):]
			realm := "http://" + realmHost + port + "/token"
			reg := challengingRegistry(t, func(string) string { return realm }, tokens)
			addr := "oci://" + reg.Listener.Addr().String() + "/murmur"
			st, err := ocistore.Open(addr, ocistore.Options{Keychain: staticKeychain{}, Retries: -1, PlainHTTP: c.plainHTTP})
			if err != nil {
				t.Fatal(err)
			}
			_, err = st.Resolve(context.Background(), grep, "1.0.0", "any")
			errtest.WantToken(t, err, errs.Denied, realm, "HTTPS")
			if seen := tokens.requests(); len(seen) != 0 {
				t.Fatalf("the realm on another port was asked for a token: %q", seen)
			}
		})
	}

	// The registry's own loopback address as the realm: the exact registry the login is for.
	tokens := startTokenServer(t)
	reg := challengingRegistry(t, func(self string) string { return "http://" + self + "/token" }, tokens)
	st, err := ocistore.Open("oci://"+reg.Listener.Addr().String()+"/murmur", ocistore.Options{Keychain: staticKeychain{}, Retries: -1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Resolve(context.Background(), grep, "1.0.0", "any")
	errtest.WantToken(t, err, errs.NotFound)
	if seen := tokens.requests(); len(seen) == 0 || !strings.Contains(seen[0], "auth=Basic ") {
		t.Fatalf("the registry's own realm got %q, want a token request with the login", seen)
	}
}
