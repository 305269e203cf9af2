package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
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

// forget empties w's Murmur home and its project's lock and tools/, for the next cold pull.
func (w *world) forget() {
	os.RemoveAll(w.home)
	os.Remove(filepath.Join(w.project, "murmur.lock"))
	os.RemoveAll(filepath.Join(w.project, "tools"))
}

// benchPull pulls one artifact of size bytes cold, outside a project (durable in the CAS, its
// payload checked; no lock or tools/ to write), and fetches the same blob with `crane blob`,
// alternately, so that both see the same machine. Each side's wall time, CPU and the registry's
// CPU (beside.report) and its peak RSS are reported; ns/op is the sum of both and means nothing. A
// benchmark run (b.N > 1) makes at least 7 pairs.
func benchPull(b *testing.B, size int) {
	reg := registrytest.Start(b)
	on := beside{registry: reg.PID()}
	dir := b.TempDir()
	w := newWorld(b)
	f := artifacttest.File(b, dir, "big", "1.0.0", artifacttest.Module(size, uint64(size)))
	store := "oci://" + reg.Addr() + "/murmur"
	runTimed(b, w.cmd("push", f, "--scope", "bench", "--store", store))
	digest := sha256File(b, f)
	os.Remove(f)
	crane := cranePath(b)
	runs := b.N
	if runs > 1 {
		runs = max(runs, 7)
	}
	var mur, peer []sample
	var murRSS, peerRSS float64
	out := filepath.Join(dir, "crane.out")
	// The last round measures peak RSS, untimed, through the rusage tool (measure).
	for i := 0; i <= runs; i++ {
		peak := i == runs
		w.forget()
		// Each side starts with nothing of the other's in flight to the disk (its writeback, the
		// discards of what was removed), which would otherwise land in the next side's fsync.
		syncDisks()
		c := w.cmd("pull", "-q", "--no-precompile", "--store", store, "bench/big@1.0.0")
		if peak {
			murRSS = runPeak(b, c)
		} else {
			mur = append(mur, on.sample(b, func() { runTimed(b, c) }))
		}

		os.Remove(out)
		fh, err := os.Create(out)
		if err != nil {
			b.Fatal(err)
		}
		syncDisks()
		c = exec.Command(crane, "blob", "--insecure", reg.Addr()+"/murmur/bench/big@"+digest)
		c.Stdout = fh
		if peak {
			peerRSS = runPeak(b, c)
		} else {
			var errb bytes.Buffer
			c.Stderr = &errb
			peer = append(peer, on.sample(b, func() {
				if err := c.Run(); err != nil {
					b.Fatalf("crane blob: %v\n%s", err, errb.String())
				}
			}))
		}
		fh.Close()
	}
	os.Remove(out)
	b.SetBytes(int64(size))
	on.report(b, "mur", mur)
	on.report(b, "crane", peer)
	b.ReportMetric(murRSS, "mur-maxrss-MiB")
	b.ReportMetric(peerRSS, "crane-maxrss-MiB")
}

func BenchmarkColdPull256MiB(b *testing.B) { benchPull(b, 256<<20) }

func BenchmarkColdPull64MiB(b *testing.B) { benchPull(b, 64<<20) }

// BenchmarkPullPeakRSS is the peak RSS of one cold `mur pull` of 64 MiB and of 1 GiB: memory
// must not grow with the blob. The 1 GiB artifact takes a while to make and push, so it runs
// only when MUR_BENCH_HEAVY is set (make bench sets it, in a run of its own).
func BenchmarkPullPeakRSS(b *testing.B) {
	if os.Getenv("MUR_BENCH_HEAVY") == "" {
		b.Skip("set MUR_BENCH_HEAVY=1 to pull 1 GiB")
	}
	reg := registrytest.Start(b)
	store := "oci://" + reg.Addr() + "/murmur"
	for _, c := range []struct {
		name, artifact string
		size           int
	}{{"64MiB", "rss64m", 64 << 20}, {"1GiB", "rss1g", 1 << 30}} {
		b.Run(c.name, func(b *testing.B) {
			dir := b.TempDir()
			w := newWorld(b)
			b.Setenv("MURMUR_MAX_ARTIFACT_DECOMPRESSED_BYTES", "2147483648") // for packing it here
			w.env = append(w.env, "MURMUR_MAX_ARTIFACT_DECOMPRESSED_BYTES=2147483648")
			f := artifacttest.File(b, dir, c.artifact, "1.0.0", artifacttest.Module(c.size, 3))
			runTimed(b, w.cmd("push", f, "--scope", "bench", "--store", store))
			os.Remove(f)
			var rss float64
			var cpu []time.Duration
			for i := 0; i < b.N; i++ {
				w.forget()
				u := measure(b, w.cmd("pull", "-q", "--no-precompile", "--store", store, "bench/"+c.artifact+"@1.0.0"))
				rss, cpu = max(rss, u.maxRSS), append(cpu, u.cpu)
			}
			b.ReportMetric(rss, "maxrss-MiB")
			b.ReportMetric(ms(median(cpu)), "cpu-ms")
		})
	}
}

// BenchmarkProject20 pulls a project of 20 artifacts of about 800 KB each (the hello guest,
// packed under 20 names) from docker-registry, cold: mur with --no-precompile, 20 `oras pull`
// processes 4 at a time, and the default mur pull with the compiled cache already warm (every
// payload is one module, compiled before).
func BenchmarkProject20(b *testing.B) {
	reg := registrytest.Start(b)
	dir := b.TempDir()
	w := newWorld(b)
	wasm := guesttest.Build(b, "hello")
	store := "oci://" + reg.Addr() + "/murmur"
	var names, refs []string
	for i := 0; i < 20; i++ {
		name := fmt.Sprintf("p%02d", i)
		f := artifacttest.File(b, dir, name, "1.0.0", wasm)
		runTimed(b, w.cmd("push", f, "--scope", "bench", "--store", store))
		names = append(names, "bench/"+name+"@1.0.0")
		refs = append(refs, reg.Addr()+"/murmur/bench/"+name+":1.0.0")
	}
	w.stores(store)
	w.write("murmur.yaml", capsuleYAML(names...))
	cold := func(keepCompiled bool) {
		ents, _ := os.ReadDir(w.home)
		for _, e := range ents {
			if !keepCompiled || e.Name() != "compiled" {
				os.RemoveAll(filepath.Join(w.home, e.Name()))
			}
		}
		os.Remove(filepath.Join(w.project, "murmur.lock"))
		os.RemoveAll(filepath.Join(w.project, "tools"))
	}
	pulls := newOrasPulls(b, orasPath(b), refs, filepath.Join(dir, "oras"), dir)
	cold(false)
	runTimed(b, w.cmd("pull", "-q")) // compiles the one module all 20 share
	interleaveOn(b, beside{registry: reg.PID()},
		// --no-precompile leaves the compiled cache alone: it stays warm for the third side.
		contender{"mur", func() { cold(true) }, func(b *testing.B) { runTimed(b, w.cmd("pull", "-q", "--no-precompile")) }},
		contender{"oras", func() { os.RemoveAll(filepath.Join(dir, "oras")) }, pulls.run},
		contender{"mur-compiled-warm", func() { cold(true) }, func(b *testing.B) { runTimed(b, w.cmd("pull", "-q")) }},
	)
	pulls.reportCPU(b)
}

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
	w.stores(store)
	w.write("murmur.yaml", capsuleYAML(names...))
	runTimed(b, w.cmd("pull", "-q", "--no-precompile"))
	requests.Store(0)
	b.ResetTimer()
	loop(b, beside{}, "mur", nil, func() { runTimed(b, w.cmd("pull", "-q", "--no-precompile")) })
	b.ReportMetric(float64(requests.Load())/float64(b.N), "requests/op")
	if requests.Load() != 0 {
		b.Fatalf("a warm locked pull made %d requests", requests.Load())
	}
}

// BenchmarkSourcePull64MiB pulls the same 64 MiB artifact cold from a GitHub release (through
// the test server's 302 to storage, in this process) and from the loopback docker-registry.
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
	for _, from := range []struct {
		name string
		on   beside
	}{{"sources", beside{served: "github"}}, {"stores", beside{registry: reg.PID()}}} {
		b.Run(from.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			loop(b, from.on, "mur", w.forget, func() {
				runTimed(b, w.cmd("pull", "-q", "--no-precompile", "--from", from.name, "--store", store, "bench/big@1.0.0"))
			})
		})
	}
}

// BenchmarkPullJobs pulls 50 small artifacts with --jobs 4 and --jobs 1, through a proxy that
// puts a 50 ms round trip before the registry: --jobs bounds bytes in flight, so --jobs 1 still
// has 8 of these 128 KiB downloads in flight and --jobs 4 has 32, and the difference is the
// round trips taken one after another.
func BenchmarkPullJobs(b *testing.B) {
	reg := registrytest.Start(b)
	dir := b.TempDir()
	w := newWorld(b)
	push := "oci://" + reg.Addr() + "/murmur"
	proxy := proxytest.Start(b, reg.Addr(), proxytest.Options{RTT: 50 * time.Millisecond})
	var names []string
	for i := 0; i < 50; i++ {
		name := "j" + string(rune('a'+i/26)) + string(rune('a'+i%26))
		f := artifacttest.File(b, dir, name, "1.0.0", artifacttest.Module(128<<10+i, uint64(128<<10+i)))
		runTimed(b, w.cmd("push", f, "--scope", "bench", "--store", push))
		names = append(names, "bench/"+name+"@1.0.0")
	}
	w.stores("oci://" + proxy.Addr() + "/murmur")
	w.write("murmur.yaml", capsuleYAML(names...))
	on := beside{registry: reg.PID(), served: "proxy"}
	for _, jobs := range []string{"4", "1"} {
		b.Run("jobs-"+jobs, func(b *testing.B) {
			loop(b, on, "mur", w.forget, func() { runTimed(b, w.cmd("pull", "-q", "--no-precompile", "--jobs", jobs)) })
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
	on := beside{registry: reg.PID(), served: "proxy"}
	for _, conns := range []string{"4", "1"} {
		b.Run("conns-"+conns, func(b *testing.B) {
			b.SetBytes(size)
			loop(b, on, "mur", w.forget, func() {
				runTimed(b, w.cmd("pull", "-q", "--no-precompile", "--connections", conns, "--store", store, "bench/wide@1.0.0"))
			})
		})
	}
}
