package ocistore_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"

	"github.com/murmur-nexus/mur/fetch/ocistore"
	"github.com/murmur-nexus/mur/internal/errs"
	"github.com/murmur-nexus/mur/internal/errs/errtest"
)

// helloCounter counts the connections whose first byte opens a TLS handshake, and apart those
// from client ports the test's dialer marked as late (dialed after the test's mark): a loser of
// the first contact's race may reach the server after that contact returned.
type helloCounter struct {
	net.Listener
	hellos, conns, lateHellos atomic.Int32
	late                      sync.Map // client address -> true, dialed after the mark
	marked                    *atomic.Bool
}

func (l *helloCounter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.conns.Add(1)
	return &peekConn{Conn: c, l: l}, nil
}

type peekConn struct {
	net.Conn
	l    *helloCounter
	once sync.Once
}

func (c *peekConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.once.Do(func() {
			if b[0] == 0x16 { // a TLS record of type handshake
				c.l.hellos.Add(1)
				if _, late := c.l.late.Load(c.RemoteAddr().String()); late {
					c.l.lateHellos.Add(1)
				}
			}
		})
	}
	return n, err
}

// loopbackRegistry serves an in-memory registry on 127.0.0.1, over TLS when secure, counting the
// TLS hellos it is sent. Its HTTPS client is trusted through the returned transport.
func loopbackRegistry(t *testing.T, secure bool) (addr string, hellos *helloCounter, rt http.RoundTripper) {
	t.Helper()
	h := ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	hc := &helloCounter{Listener: srv.Listener}
	srv.Listener = hc
	hc.marked = &atomic.Bool{}
	dialer := &net.Dialer{}
	tr := &http.Transport{DialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, a)
		if err == nil && hc.marked.Load() {
			hc.late.Store(c.LocalAddr().String(), true)
		}
		return c, err
	}}
	if secure {
		srv.StartTLS()
		tr.TLSClientConfig = &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	t.Cleanup(tr.CloseIdleConnections)
	return srv.Listener.Addr().String(), hc, tr
}

// resolveOnce opens the registry as a new command would (a new pool, the home's memory read
// afresh) and resolves grep@1.0.0 there.
func resolveOnce(t *testing.T, addr, memory string, rt http.RoundTripper) {
	t.Helper()
	s, err := ocistore.Open("oci://"+addr+"/murmur", ocistore.Options{Transport: rt, Schemes: ocistore.NewSchemes(memory), Pool: ocistore.NewPool()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Resolve(context.Background(), grep, "1.0.0", "any"); err != nil {
		t.Fatalf("resolve at %s: %v", addr, err)
	}
}

// A loopback registry that speaks plain HTTP is asked over both schemes at first contact and
// remembered in the home: every later command sends it no TLS hello at all.
func TestPlainLoopbackRegistryRemembered(t *testing.T) {
	addr, hellos, rt := loopbackRegistry(t, false)
	pusher, err := ocistore.Open("oci://"+addr+"/murmur", ocistore.Options{PlainHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	push(t, pusher, grep, "1.0.0", "any", payload(100, 1))
	memory := filepath.Join(t.TempDir(), "registries")
	hellos.hellos.Store(0)
	resolveOnce(t, addr, memory, rt)
	if n := hellos.hellos.Load(); n > 1 {
		t.Errorf("first contact sent %d TLS hellos; want at most the one it races", n)
	}
	b, err := os.ReadFile(memory)
	if err != nil || !strings.Contains(string(b), addr+" http\n") {
		t.Fatalf("the home's memory %q (%v) does not name %s as plain HTTP", b, err, addr)
	}
	hellos.marked.Store(true)
	for range 2 {
		resolveOnce(t, addr, memory, rt)
	}
	if n := hellos.lateHellos.Load(); n != 0 {
		t.Errorf("later commands sent %d TLS hellos to a registry remembered as plain HTTP; want none", n)
	}
}

// A loopback registry that speaks TLS wins the race over HTTPS, and one remembered as plain HTTP
// that now speaks TLS is still reached, and forgotten.
func TestTLSLoopbackRegistryWinsTheRace(t *testing.T) {
	addr, _, rt := loopbackRegistry(t, true)
	pusher, err := ocistore.Open("oci://"+addr+"/murmur", ocistore.Options{Transport: rt})
	if err != nil {
		t.Fatal(err)
	}
	push(t, pusher, grep, "1.0.0", "any", payload(100, 2))
	memory := filepath.Join(t.TempDir(), "registries")
	if err = os.WriteFile(memory, []byte(addr+" http\n127.0.0.1:1 http\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	resolveOnce(t, addr, memory, rt)
	b, _ := os.ReadFile(memory)
	if strings.Contains(string(b), addr) || !strings.Contains(string(b), "127.0.0.1:1 http") {
		t.Errorf("after a TLS answer the memory reads %q; want %s forgotten and the other registry kept", b, addr)
	}
	resolveOnce(t, addr, memory, rt)
}

// The memory is a hint about loopback only: a line naming another host never makes mur speak
// plain HTTP to it.
func TestSchemesMemoryIgnoresOtherHosts(t *testing.T) {
	var plain atomic.Int32
	rt := roundTripCount(func(r *http.Request) {
		if r.URL.Scheme == "http" {
			plain.Add(1)
		}
	})
	memory := filepath.Join(t.TempDir(), "registries")
	if err := os.WriteFile(memory, []byte("registry.example:5000 http\n10.0.0.1:5000 http\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"registry.example:5000", "10.0.0.1:5000"} {
		s, err := ocistore.Open("oci://"+host+"/murmur", ocistore.Options{Transport: rt, Schemes: ocistore.NewSchemes(memory), Retries: -1})
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Resolve(context.Background(), grep, "1.0.0", "any")
		errtest.WantToken(t, err, errs.Network)
	}
	if n := plain.Load(); n != 0 {
		t.Errorf("%d plain-HTTP requests to registries off loopback; want none", n)
	}
}

type roundTripCount func(*http.Request)

func (f roundTripCount) RoundTrip(r *http.Request) (*http.Response, error) {
	f(r)
	return nil, errors.New("no network in this test")
}
