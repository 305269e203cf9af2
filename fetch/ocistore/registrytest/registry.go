// Package registrytest starts OCI registries for tests: the real Debian docker-registry
// (distribution 2.8) on a loopback port, and go-containerregistry's in-process registry behind a
// middleware hook for fault injection. Either can ask for Bearer tokens, as hosted registries do
// (StartBearer, StartInProcessBearer), and Faulty counts every request and, once armed, sends
// each GET but the /v2/ ping through a fault.
package registrytest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/murmur-nexus/mur/internal/slowdown"
)

// Binary is where Debian's docker-registry package installs the registry.
const Binary = "/usr/bin/docker-registry"

// Registry is a running registry that a test talks to at Addr.
type Registry struct {
	addr    string
	pid     int // the registry process's, 0 for one in this process
	once    sync.Once
	stop    func()
	storage string // the real registry's storage root; "" in process
}

// Addr is the registry's host:port on the loopback interface.
func (r *Registry) Addr() string { return r.addr }

// PID is the registry process's id, for benchmarks that read its CPU time; 0 for a registry
// that runs in this process.
func (r *Registry) PID() int { return r.pid }

// URL is http://Addr.
func (r *Registry) URL() string { return "http://" + r.addr }

// Stop ends the registry. It is safe to call more than once; t.Cleanup calls it too.
func (r *Registry) Stop() { r.once.Do(r.stop) }

// Start runs the real docker-registry with its storage in a temporary folder. When the binary is
// missing or the registry does not come up, the test is skipped, unless the environment variable
// CI is set, in which case it fails: CI must exercise the real registry.
func Start(t testing.TB) *Registry {
	t.Helper()
	return start(t, Binary)
}

func start(t testing.TB, bin string) *Registry {
	t.Helper()
	r, err := launch(bin, t.TempDir())
	if err != nil {
		unavailable(t, err.Error())
		return nil
	}
	t.Cleanup(r.Stop)
	return r
}

// Launch runs the real docker-registry with its storage in dir, for callers that are not a
// test's own goroutine (a script's command, say). The caller stops it.
func Launch(dir string) (*Registry, error) { return launch(Binary, dir) }

func launch(bin, dir string) (*Registry, error) { return launchWith(bin, dir, "") }

// launchWith is launch with extra top-level sections of the registry's configuration (auth).
func launchWith(bin, dir, extra string) (*Registry, error) {
	if _, err := os.Stat(bin); err != nil {
		// Elsewhere than Debian the binary may sit on PATH instead.
		p, lerr := exec.LookPath("docker-registry")
		if bin != Binary || lerr != nil {
			return nil, fmt.Errorf("%s not found (%v)", bin, err)
		}
		bin = p
	}
	var lastErr error
	// Picking a free port and handing it to another process races with everything else on the
	// machine, so a lost race is retried with a new port.
	for attempt := 0; attempt < 3; attempt++ {
		r, err := startOnce(bin, filepath.Join(dir, fmt.Sprintf("registry-%d", attempt)), extra)
		if err == nil {
			return r, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func unavailable(t testing.TB, why string) {
	t.Helper()
	msg := "the real OCI registry is unavailable: " + why + "; install it with `apt-get install docker-registry`"
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
		return
	}
	t.Skip(msg)
}

func startOnce(bin, dir, extra string) (*Registry, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	config := fmt.Sprintf(`version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
%s`, filepath.Join(dir, "storage"), addr, extra)
	configPath := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(configPath, []byte(config), 0o600); err != nil {
		return nil, err
	}
	var output bytes.Buffer
	cmd := exec.Command(bin, "serve", configPath)
	cmd.Stdout = &lockedWriter{w: &output}
	cmd.Stderr = cmd.Stdout
	// OTEL and similar variables of the host must not change how the registry behaves.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %v", bin, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	kill := func() {
		cmd.Process.Kill()
		<-exited
	}

	limit := slowdown.Scale(15 * time.Second)
	deadline := time.Now().Add(limit)
	client := &http.Client{Timeout: time.Second}
	for {
		select {
		case <-exited:
			return nil, fmt.Errorf("%s exited before answering on %s: %s", bin, addr, strings.TrimSpace(output.String()))
		default:
		}
		resp, err := client.Get("http://" + addr + "/v2/")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			// With auth configured, the ping's 401 says the registry is up too.
			if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnauthorized {
				break
			}
		}
		if time.Now().After(deadline) {
			kill()
			return nil, fmt.Errorf("%s did not answer GET /v2/ on %s within %s (last error %v): %s", bin, addr, limit, err, strings.TrimSpace(output.String()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	return &Registry{addr: addr, pid: cmd.Process.Pid, stop: kill, storage: filepath.Join(dir, "storage")}, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// StartInProcess serves go-containerregistry's in-memory registry on a loopback port through
// wrap, a middleware that tests use to inject faults. wrap may be nil.
func StartInProcess(t testing.TB, wrap func(http.Handler) http.Handler) *Registry {
	t.Helper()
	var h http.Handler = ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Start()
	r := &Registry{
		addr: strings.TrimPrefix(srv.URL, "http://"),
		stop: func() {
			// A handler that stalls on purpose must not hold Close up forever.
			srv.CloseClientConnections()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			done := make(chan struct{})
			go func() { srv.Close(); close(done) }()
			select {
			case <-done:
			case <-ctx.Done():
			}
		},
	}
	t.Cleanup(r.Stop)
	return r
}

// PutManifest stores raw under repo:tag exactly as given, with Content-Type mediaType, so that a
// test can serve a manifest that no well-behaved client would push.
func (r *Registry) PutManifest(t testing.TB, repo, tag string, raw []byte, mediaType string) {
	t.Helper()
	ref, err := name.NewTag(r.addr+"/"+repo+":"+tag, name.Insecure)
	if err != nil {
		t.Fatalf("registry: bad reference %s/%s:%s: %v", r.addr, repo, tag, err)
	}
	if err := remote.Put(ref, rawManifest{raw, types.MediaType(mediaType)}); err != nil {
		t.Fatalf("registry: putting manifest %s: %v", ref, err)
	}
}

type rawManifest struct {
	raw []byte
	mt  types.MediaType
}

func (m rawManifest) RawManifest() ([]byte, error)        { return m.raw, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return m.mt, nil }
