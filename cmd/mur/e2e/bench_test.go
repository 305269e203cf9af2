package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/fetch/github/githubtest"
	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/fetch/proxytest"
	"github.com/murmur-nexus/mur/internal/artifact/artifacttest"
	"github.com/murmur-nexus/mur/sandbox/guesttest"
)

// The benchmarks here measure whole processes, each beside its peer in the same run, so that
// `make bench` can report ratios: mur against crane, sha256sum and a bare wazero program.

// runPeak runs c and returns its peak resident memory in MiB, read from /proc/<pid>/status
// (VmHWM) while it runs. The rusage of a child would not do: a forked child inherits the high
// water mark of this test process, which holds the artifacts in memory.
func runPeak(tb testing.TB, c *exec.Cmd) float64 {
	tb.Helper()
	var out bytes.Buffer
	if c.Stdout == nil {
		c.Stdout = &out
	}
	c.Stderr = &out
	if err := c.Start(); err != nil {
		tb.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	status := fmt.Sprintf("/proc/%d/status", c.Process.Pid)
	var peak float64
	for {
		select {
		case err := <-done:
			if err != nil {
				tb.Fatalf("%v: %v\n%s", c.Args, err, out.String())
			}
			return peak
		case <-time.After(5 * time.Millisecond):
			if st, err := os.ReadFile(status); err == nil {
				for _, l := range strings.Split(string(st), "\n") {
					if rest, ok := strings.CutPrefix(l, "VmHWM:"); ok {
						if kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64); err == nil {
							peak = max(peak, kb/1024)
						}
					}
				}
			}
		}
	}
}

func runTimed(b *testing.B, c *exec.Cmd) {
	b.Helper()
	out, err := c.CombinedOutput()
	if err != nil {
		b.Fatalf("%v: %v\n%s", c.Args, err, out)
	}
}

func benchPull(b *testing.B, size int) {
	reg := registrytest.Start(b)
	dir := b.TempDir()
	w := newWorld(b)
	f := artifacttest.File(b, dir, "big", "1.0.0", artifacttest.Module(size, uint64(size)))
	store := "oci://" + reg.Addr() + "/murmur"
	c := w.cmd("push", f, "--scope", "bench", "--store", store)
	runTimed(b, c)
	digest := sha256File(b, f)

	crane := cranePath(b)
	// mur as it comes (a blob of 64 MiB or more over 4 connections), and over one stream: on
	// loopback there is no per-connection limit to beat, only CPU to share.
	for _, v := range []struct{ name, conns string }{{"mur", "4"}, {"mur-one-stream", "1"}} {
		b.Run(v.name, func(b *testing.B) {
			b.SetBytes(int64(size))
			var rss float64
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				os.RemoveAll(w.home)
				os.Remove(filepath.Join(w.project, "murmur.lock"))
				os.RemoveAll(filepath.Join(w.project, "tools"))
				b.StartTimer()
				rss = max(rss, runPeak(b, w.cmd("pull", "-q", "--no-precompile", "--connections", v.conns, "--store", store, "bench/big@1.0.0")))
			}
			b.ReportMetric(rss, "maxrss-MiB")
		})
	}
	b.Run("crane", func(b *testing.B) {
		b.SetBytes(int64(size))
		var rss float64
		for i := 0; i < b.N; i++ {
			out := filepath.Join(dir, "crane.out")
			os.Remove(out)
			f, err := os.Create(out)
			if err != nil {
				b.Fatal(err)
			}
			c := exec.Command(crane, "blob", "--insecure", reg.Addr()+"/murmur/bench/big@"+digest)
			c.Stdout = f
			rss = max(rss, runPeak(b, c))
			f.Close()
		}
		b.ReportMetric(rss, "maxrss-MiB")
	})
}

func BenchmarkColdPull256MiB(b *testing.B) { benchPull(b, 256<<20) }

func BenchmarkColdPull64MiB(b *testing.B) { benchPull(b, 64<<20) }

// BenchmarkWarmLockedPull20 is a whole `mur pull` of a project whose 20 pins are all in the
// CAS. A counting proxy in front of the store proves it makes no request.
func BenchmarkWarmLockedPull20(b *testing.B) {
	reg := registrytest.Start(b)
	var requests atomic.Int64
	u, _ := url.Parse("http://" + reg.Addr())
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		rp.ServeHTTP(w, r)
	}))
	defer srv.Close()
	store := "oci://" + strings.TrimPrefix(srv.URL, "http://") + "/murmur"
	dir := b.TempDir()
	w := newWorld(b)
	var names []string
	for i := 0; i < 20; i++ {
		name := fmt.Sprintf("t%02d", i)
		f := artifacttest.File(b, dir, name, "1.0.0", artifacttest.Module(64<<10+i, uint64(64<<10+i)))
		runTimed(b, w.cmd("push", f, "--scope", "bench", "--store", store))
		names = append(names, "bench/"+name+"@1.0.0")
	}
	os.WriteFile(filepath.Join(w.project, ".murmur", "config.yaml"), []byte("stores: [\""+store+"\"]\n"), 0o644)
	os.WriteFile(filepath.Join(w.project, "murmur.yaml"), []byte(capsuleYAML(names...)), 0o644)
	runTimed(b, w.cmd("pull", "-q", "--no-precompile"))
	requests.Store(0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		runTimed(b, w.cmd("pull", "-q", "--no-precompile"))
	}
	b.StopTimer()
	b.ReportMetric(float64(requests.Load())/float64(b.N), "requests/op")
	if requests.Load() != 0 {
		b.Fatalf("a warm locked pull made %d requests", requests.Load())
	}
}

// BenchmarkVerify re-hashes 32 blobs of 16 MiB: `mur verify` (every core) against coreutils
// sha256sum and a single-goroutine Go hash of the same files.
func BenchmarkVerify(b *testing.B) {
	dir := b.TempDir()
	w := newWorld(b)
	store := "oci-layout:" + filepath.Join(dir, "store")
	var names, files []string
	const n, size = 32, 16 << 20
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("v%02d", i)
		f := artifacttest.File(b, dir, name, "1.0.0", artifacttest.Module(size, uint64(i)))
		runTimed(b, w.cmd("push", f, "--scope", "bench", "--store", store))
		names = append(names, "bench/"+name+"@1.0.0")
	}
	os.WriteFile(filepath.Join(w.project, ".murmur", "config.yaml"), []byte("stores: [\""+store+"\"]\n"), 0o644)
	os.WriteFile(filepath.Join(w.project, "murmur.yaml"), []byte(capsuleYAML(names...)), 0o644)
	runTimed(b, w.cmd("pull", "-q", "--no-precompile"))
	blobs, _ := filepath.Glob(filepath.Join(w.home, "cas", "blobs", "sha256", "*"))
	files = blobs
	total := int64(n * size)
	b.Run("mur", func(b *testing.B) {
		b.SetBytes(total)
		for i := 0; i < b.N; i++ {
			runTimed(b, w.cmd("verify", "-q"))
		}
	})
	b.Run("sha256sum", func(b *testing.B) {
		b.SetBytes(total)
		for i := 0; i < b.N; i++ {
			runTimed(b, exec.Command("sha256sum", files...))
		}
	})
	b.Run("go-serial", func(b *testing.B) {
		b.SetBytes(total)
		buf := make([]byte, 1<<20)
		for i := 0; i < b.N; i++ {
			for _, f := range files {
				fh, _ := os.Open(f)
				h := sha256.New()
				io.CopyBuffer(h, fh, buf)
				fh.Close()
			}
		}
	})
}

// BenchmarkRunHello runs the hello guest as a whole process: mur with a warm compiled cache,
// a bare wazero program with a warm cache, and mur with a cold cache.
func BenchmarkRunHello(b *testing.B) {
	dir := b.TempDir()
	w := newWorld(b)
	wasm := guesttest.Build(b, "hello")
	wasmPath := filepath.Join(dir, "hello.wasm")
	os.WriteFile(wasmPath, wasm, 0o644)
	f := artifacttest.File(b, dir, "hello", "1.0.0", wasm)
	store := "oci-layout:" + filepath.Join(dir, "store")
	runTimed(b, w.cmd("push", f, "--scope", "bench", "--store", store))
	os.WriteFile(filepath.Join(w.project, ".murmur", "config.yaml"), []byte("stores: [\""+store+"\"]\n"), 0o644)
	os.WriteFile(filepath.Join(w.project, "murmur.yaml"), []byte(capsuleYAML("bench/hello@1.0.0")), 0o644)
	runTimed(b, w.cmd("pull", "-q"))

	bare := filepath.Join(dir, "barewazero")
	build := exec.Command("go", "build", "-o", bare, "./testdata/barewazero")
	runTimed(b, build)
	bareCache := filepath.Join(dir, "bare-cache")
	runTimed(b, exec.Command(bare, bareCache, wasmPath))

	b.Run("mur-warm", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			runTimed(b, w.cmd("run", "hello"))
		}
	})
	b.Run("bare-wazero-warm", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			runTimed(b, exec.Command(bare, bareCache, wasmPath))
		}
	})
	b.Run("mur-cold", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			os.RemoveAll(filepath.Join(w.home, "compiled"))
			b.StartTimer()
			runTimed(b, w.cmd("run", "hello"))
		}
	})
}

// BenchmarkRunMemory is the peak RSS of `mur run`, a whole process, for a guest that grows to
// 1 GiB under a 2 GiB cap and for one that stays small under the default cap, beside the bare
// wazero program (wazero's own memory, which copies on every grow) running the same guest. Each
// reports the guest's own memory too: the target is mur's peak at most that plus 128 MiB.
func BenchmarkRunMemory(b *testing.B) {
	dir := b.TempDir()
	grow := guesttest.Build(b, "grow")
	growPath := filepath.Join(dir, "grow.wasm")
	os.WriteFile(growPath, grow, 0o644)
	bare := filepath.Join(dir, "barewazero")
	runTimed(b, exec.Command("go", "build", "-o", bare, "./testdata/barewazero"))
	bareCache := filepath.Join(dir, "bare-cache")
	for _, c := range []struct{ name, caps, mib string }{
		{"1GiB-of-2GiB-cap", "  limits: { memory_mib: 2048 }\n", "1024"},
		{"16MiB-default-cap", "", "16"},
	} {
		w := sandboxWorld(b, c.caps, map[string][]byte{"grow": grow})
		runTimed(b, w.cmd("pull", "-q"))
		runTimed(b, exec.Command(bare, bareCache, growPath, "0"))
		for _, peer := range []struct {
			name string
			cmd  func() *exec.Cmd
		}{
			{"mur", func() *exec.Cmd { return w.cmd("run", "grow", "--", c.mib) }},
			{"bare-wazero", func() *exec.Cmd { return exec.Command(bare, bareCache, growPath, c.mib) }},
		} {
			b.Run(peer.name+"-"+c.name, func(b *testing.B) {
				var rss, guest float64
				for i := 0; i < b.N; i++ {
					var out bytes.Buffer
					cmd := peer.cmd()
					cmd.Stdout = &out
					rss = max(rss, runPeak(b, cmd))
					m := guestMemory.FindStringSubmatch(out.String())
					if m == nil {
						b.Fatalf("grow %s: %s", c.mib, out.String())
					}
					g, _ := strconv.ParseFloat(m[1], 64)
					guest = max(guest, g)
				}
				b.ReportMetric(rss, "maxrss-MiB")
				b.ReportMetric(guest, "guest-MiB")
			})
		}
	}
}

// BenchmarkPullJobs pulls 50 small artifacts with --jobs 4 and --jobs 1.
func BenchmarkPullJobs(b *testing.B) {
	reg := registrytest.Start(b)
	dir := b.TempDir()
	w := newWorld(b)
	store := "oci://" + reg.Addr() + "/murmur"
	var names []string
	for i := 0; i < 50; i++ {
		name := "j" + string(rune('a'+i/26)) + string(rune('a'+i%26))
		f := artifacttest.File(b, dir, name, "1.0.0", artifacttest.Module(128<<10+i, uint64(128<<10+i)))
		runTimed(b, w.cmd("push", f, "--scope", "bench", "--store", store))
		names = append(names, "bench/"+name+"@1.0.0")
	}
	os.WriteFile(filepath.Join(w.project, ".murmur", "config.yaml"), []byte("stores: [\""+store+"\"]\n"), 0o644)
	os.WriteFile(filepath.Join(w.project, "murmur.yaml"), []byte(capsuleYAML(names...)), 0o644)
	for _, jobs := range []string{"4", "1"} {
		b.Run("jobs-"+jobs, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				os.RemoveAll(w.home)
				os.Remove(filepath.Join(w.project, "murmur.lock"))
				os.RemoveAll(filepath.Join(w.project, "tools"))
				b.StartTimer()
				runTimed(b, w.cmd("pull", "-q", "--no-precompile", "--jobs", jobs))
			}
		})
	}
}

func sha256File(b *testing.B, path string) string {
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	io.Copy(h, f)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// cranePath installs crane at bench time (never vendored) and returns its path.
func cranePath(b *testing.B) string {
	if p, err := exec.LookPath("crane"); err == nil {
		return p
	}
	bin := filepath.Join(os.TempDir(), "mur-bench-bin")
	p := filepath.Join(bin, "crane")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	c := exec.Command("go", "install", "github.com/google/go-containerregistry/cmd/crane@v0.22.1")
	c.Env = append(os.Environ(), "GOBIN="+bin)
	start := time.Now()
	if out, err := c.CombinedOutput(); err != nil {
		b.Fatalf("installing crane: %v\n%s", err, out)
	}
	b.Logf("installed crane in %s", time.Since(start))
	return p
}

// BenchmarkSourcePull64MiB pulls the same 64 MiB artifact cold from a GitHub release (through
// the test server's 302 to storage) and from the loopback docker-registrytest.
func BenchmarkSourcePull64MiB(b *testing.B) {
	const size = 64 << 20
	dir := b.TempDir()
	f := artifacttest.File(b, dir, "big", "1.0.0", artifacttest.Module(size, uint64(size)))
	data, _ := os.ReadFile(f)
	gh := githubtest.New(b)
	gh.AddRepo("bench", "murmur-artifacts", 1, 2)
	gh.Publish("bench", "murmur-artifacts", "bench", githubtest.Artifact{Name: "bench/big", Version: "1.0.0", Release: "v1.0.0", Asset: "big-1.0.0.mur.zip", Data: data})
	reg := registrytest.Start(b)
	store := "oci://" + reg.Addr() + "/murmur"
	w := newWorld(b)
	w.env = append(w.env, "MUR_GITHUB_API_BASE="+gh.APIURL())
	runTimed(b, w.cmd("push", f, "--scope", "bench", "--store", store))
	for _, from := range []string{"sources", "stores"} {
		b.Run(from, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				os.RemoveAll(w.home)
				os.Remove(filepath.Join(w.project, "murmur.lock"))
				os.RemoveAll(filepath.Join(w.project, "tools"))
				b.StartTimer()
				runTimed(b, w.cmd("pull", "-q", "--no-precompile", "--from", from, "--store", store, "bench/big@1.0.0"))
			}
		})
	}
}

// BenchmarkParallelRanges128MiB pulls a 128 MiB blob through a proxy that caps every connection
// at 16 MiB/s, as CDNs and object stores do, over 4 connections and over 1.
func BenchmarkParallelRanges128MiB(b *testing.B) {
	const size = 128 << 20
	reg := registrytest.Start(b)
	w := newWorld(b)
	f := artifacttest.File(b, b.TempDir(), "wide", "1.0.0", artifacttest.Module(size, 128))
	runTimed(b, w.cmd("push", f, "--scope", "bench", "--store", "oci://"+reg.Addr()+"/murmur"))
	px := proxytest.Start(b, reg.Addr(), proxytest.Options{PathContains: "/blobs/", BytesPerSecond: 16 << 20})
	store := "oci://" + px.Addr() + "/murmur"
	for _, conns := range []string{"4", "1"} {
		b.Run("conns-"+conns, func(b *testing.B) {
			b.SetBytes(size)
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				os.RemoveAll(w.home)
				os.Remove(filepath.Join(w.project, "murmur.lock"))
				os.RemoveAll(filepath.Join(w.project, "tools"))
				b.StartTimer()
				runTimed(b, w.cmd("pull", "-q", "--no-precompile", "--connections", conns, "--store", store, "bench/wide@1.0.0"))
			}
		})
	}
}
