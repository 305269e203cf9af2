package ocistore_test

import (
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"

	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
)

func TestUntrustedTLSKeepsTheCause(t *testing.T) {
	srv := httptest.NewTLSServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "https://")
	s := open(t, "oci://"+addr+"/murmur", ocistore.Options{Retries: -1})
	_, err := s.Resolve(context.Background(), grep, "1.2.0", "any")
	errtest.WantToken(t, err, errs.Network, "x509: certificate signed by unknown authority", "SSL_CERT_FILE")
	if strings.Contains(errs.Message(err), "\n") || strings.Contains(errs.Message(err), "HTTP 400") {
		t.Fatalf("the message should be one line that names the x509 cause, not the plain-HTTP fallback: %q", errs.Message(err))
	}
}

// aliasTransport maps the made-up host name alias to a loopback address, the way an /etc/hosts
// entry or docker compose's DNS would, so that the test exercises a registry whose name is not
// literally localhost or 127.0.0.1 on any machine.
func aliasTransport(alias, target string) *http.Transport {
	d := &net.Dialer{Timeout: 5 * time.Second}
	return &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if host, port, _ := net.SplitHostPort(addr); host == alias {
			_, tport, _ := net.SplitHostPort(target)
			if port != tport {
				return nil, &net.OpError{Op: "dial", Net: network, Err: os.ErrNotExist}
			}
			addr = target
		}
		return d.DialContext(ctx, network, addr)
	}}
}

func TestPlainHTTPOnlyByChoice(t *testing.T) {
	var plain atomic.Int64
	r := registrytest.StartInProcess(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if req.TLS == nil && req.Method != "" {
				plain.Add(1)
			}
			h.ServeHTTP(w, req)
		})
	})
	_, port, _ := net.SplitHostPort(r.Addr())
	alias := "registry.lab.test:" + port
	rt := aliasTransport("registry.lab.test", r.Addr())

	// Not loopback by name: HTTPS only, and no request reaches the plain-HTTP server.
	s := open(t, "oci://"+alias+"/murmur", ocistore.Options{Transport: rt, Retries: -1})
	_, err := s.Resolve(context.Background(), grep, "1.2.0", "any")
	errtest.WantToken(t, err, errs.Network, "speaks plain HTTP", "--plain-http", "plain_http: true")
	if n := plain.Load(); n != 0 {
		t.Fatalf("%d plain-HTTP requests reached %s without --plain-http", n, alias)
	}

	// Chosen: it works, over plain HTTP only.
	s = open(t, "oci://"+alias+"/murmur", ocistore.Options{Transport: rt, Retries: -1, PlainHTTP: true})
	d := push(t, s, grep, "1.2.0", "any", payload(1000, 99))
	got, err := s.Resolve(context.Background(), grep, "1.2.0", "any")
	if err != nil || got.Digest != d.Digest {
		t.Fatalf("Resolve over plain HTTP = %+v, %v", got, err)
	}
	if plain.Load() == 0 {
		t.Fatal("no plain-HTTP request was made")
	}
}

func TestPlainHTTPAgainstHTTPS(t *testing.T) {
	srv := httptest.NewTLSServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "https://")
	s := open(t, "oci://"+addr+"/murmur", ocistore.Options{Retries: -1, PlainHTTP: true})
	_, err := s.Resolve(context.Background(), grep, "1.2.0", "any")
	errtest.WantToken(t, err, errs.Network, "speaks HTTPS", "drop --plain-http")
}

func TestServerMessagesOnOneLine(t *testing.T) {
	r := registrytest.StartInProcess(t, func(http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusTeapot)
			io.WriteString(w, "I am a teapot\n  and this is\n")
		})
	})
	s := open(t, "oci://"+r.Addr()+"/murmur", ocistore.Options{Retries: -1})
	_, err := s.Resolve(context.Background(), grep, "1.2.0", "any")
	errtest.WantToken(t, err, errs.Network, "HTTP 418", "I am a teapot and this is")
	if strings.Contains(errs.Message(err), "\n") {
		t.Fatalf("a server's message spreads over lines: %q", errs.Message(err))
	}
}

func TestCredentialFailuresNameTheirFile(t *testing.T) {
	r := registrytest.StartInProcess(t, nil)
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("DOCKER_CONFIG", "")
	t.Setenv("REGISTRY_AUTH_FILE", "")
	t.Setenv("XDG_RUNTIME_DIR", "")
	t.Setenv("XDG_CONFIG_HOME", "")
	cfg := filepath.Join(home, ".docker", "config.json")
	if err := os.MkdirAll(filepath.Dir(cfg), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, config string
		want         []string
	}{
		{"broken json", `{"auths": {`, []string{cfg, "docker login " + r.Addr(), "crane auth login", "oras login"}},
		{"missing helper", `{"credsStore": "mur-test-nope"}`, []string{"docker-credential-mur-test-nope", cfg, "docker login"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(cfg, []byte(tc.config), 0o600); err != nil {
				t.Fatal(err)
			}
			s := open(t, "oci://"+r.Addr()+"/murmur", ocistore.Options{Retries: -1})
			_, err := s.Resolve(context.Background(), grep, "1.2.0", "any")
			errtest.WantToken(t, err, errs.InvalidConfig, tc.want...)
			if strings.Contains(errs.Message(err), "can't reach") {
				t.Fatalf("a credential failure is not an unreachable registry: %q", errs.Message(err))
			}
		})
	}
}
