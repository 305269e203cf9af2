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
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/fetch/github/githubtest"
	"github.com/murmur-nexus/mur/fetch/ocistore/registrytest"
	"github.com/murmur-nexus/mur/fetch/proxytest"
	"github.com/murmur-nexus/mur/internal/artifact"
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

// cpuOf is the CPU time, user and system, that the finished process c took.
func cpuOf(c *exec.Cmd) time.Duration {
	return c.ProcessState.UserTime() + c.ProcessState.SystemTime()
}

// procCPU is the CPU, user and system, that the running process pid has taken so far, from
// /proc/<pid>/stat (utime and stime, in clock ticks of 10 ms); 0 where it can't be read.
func procCPU(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name, in parentheses, may hold spaces: fields are counted after it.
	_, rest, ok := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if !ok || len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// median is the middle of ds, which it sorts.
func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// benchPull pulls one artifact of size bytes cold, outside a project (durable in the CAS, its
// payload checked; no lock or tools/ to write), and fetches the same blob with `crane blob`,
// alternately, so that both see the same machine. Each side's median, fastest and slowest run,
// CPU and peak RSS are reported as metrics; ns/op is the sum of both and means nothing. A
// benchmark run (b.N > 1) makes at least 7 pairs.
func benchPull(b *testing.B, size int) {
	reg := registrytest.Start(b)
	dir := b.TempDir()
	w := newWorld(b)
	f := artifacttest.File(b, dir, "big", "1.0.0", artifacttest.Module(size, uint64(size)))
	store := "oci://" + reg.Addr() + "/murmur"
	c := w.cmd("push", f, "--scope", "bench", "--store", store)
	runTimed(b, c)
	digest := sha256File(b, f)
	os.Remove(f)
	crane := cranePath(b)
	runs := b.N
	if runs > 1 {
		runs = max(runs, 7)
	}
	var mur, peer, murCPU, peerCPU, murReg, peerReg []time.Duration
	var murRSS, peerRSS float64
	out := filepath.Join(dir, "crane.out")
	// The last round measures peak RSS, untimed: reading /proc/<pid>/status every few
	// milliseconds contends with the process for its memory map and takes a core from it.
	for i := 0; i <= runs; i++ {
		peak := i == runs
		os.RemoveAll(w.home)
		os.Remove(filepath.Join(w.project, "murmur.lock"))
		os.RemoveAll(filepath.Join(w.project, "tools"))
		// Each side starts with nothing of the other's in flight to the disk (its writeback, the
		// discards of what was removed), which would otherwise land in the next side's fsync.
		syncDisks()
		c := w.cmd("pull", "-q", "--no-precompile", "--store", store, "bench/big@1.0.0")
		if peak {
			murRSS = runPeak(b, c)
		} else {
			start, reg0 := time.Now(), procCPU(reg.PID())
			runTimed(b, c)
			mur = append(mur, time.Since(start))
			murCPU = append(murCPU, cpuOf(c))
			murReg = append(murReg, procCPU(reg.PID())-reg0)
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
			start, reg0 := time.Now(), procCPU(reg.PID())
			if err := c.Run(); err != nil {
				b.Fatalf("crane blob: %v\n%s", err, errb.String())
			}
			peer = append(peer, time.Since(start))
			peerCPU = append(peerCPU, cpuOf(c))
			peerReg = append(peerReg, procCPU(reg.PID())-reg0)
		}
		fh.Close()
	}
	os.Remove(out)
	b.SetBytes(int64(size))
	reportSpread(b, "mur", mur)
	reportSpread(b, "crane", peer)
	b.ReportMetric(float64(median(murCPU).Microseconds())/1000, "mur-cpu-ms")
	b.ReportMetric(float64(median(peerCPU).Microseconds())/1000, "crane-cpu-ms")
	// The registry serves both on this machine's cores: its CPU for each side's pulls.
	b.ReportMetric(float64(median(murReg).Microseconds())/1000, "mur-registry-cpu-ms")
	b.ReportMetric(float64(median(peerReg).Microseconds())/1000, "crane-registry-cpu-ms")
	b.ReportMetric(murRSS, "mur-maxrss-MiB")
	b.ReportMetric(peerRSS, "crane-maxrss-MiB")
}

// contender is one side of an interleaved benchmark: setup (untimed) then run (timed).
type contender struct {
	name  string
	setup func()
	run   func(b *testing.B)
}

// interleave runs each contender in turn, round after round, so that every side sees the same
// moments of a shared machine, and reports each side's median, fastest and slowest round, and
// the median CPU (user and system) of the processes it ran, which a loaded machine moves far
// less than wall time: <side>-cpu-ms. A side that runs in this process (a Go hash) reports this
// process's CPU instead, which counts whatever else runs in it (a proxy). A benchmark run
// (b.N > 1) makes at least 7 rounds; ns/op is the sum of all sides and means nothing.
func interleave(b *testing.B, cs ...contender) { interleaveOn(b, 0, cs...) }

// interleaveOn is interleave beside a registry process, registry its pid: each side also
// reports the registry's CPU over its rounds, <side>-registry-cpu-ms.
func interleaveOn(b *testing.B, registry int, cs ...contender) {
	rounds := b.N
	if rounds > 1 {
		rounds = max(rounds, 7)
	}
	times := make([][]time.Duration, len(cs))
	cpu := make([][]time.Duration, len(cs))
	reg := make([][]time.Duration, len(cs))
	for i := 0; i < rounds; i++ {
		// The order turns every round and runs backwards every other len(cs) rounds, so that no
		// side always runs right after the same other one (whose deleted files and dirty pages
		// the next run pays for).
		for k := range cs {
			j := (i + k) % len(cs)
			if (i/len(cs))%2 == 1 {
				j = len(cs) - 1 - j
			}
			c := cs[j]
			if c.setup != nil {
				c.setup()
			}
			start, kids, self, reg0 := time.Now(), childrenCPU(b), selfCPU(b), procCPU(registry)
			c.run(b)
			times[j] = append(times[j], time.Since(start))
			took := childrenCPU(b) - kids
			if took == 0 {
				took = selfCPU(b) - self
			}
			cpu[j] = append(cpu[j], took)
			reg[j] = append(reg[j], procCPU(registry)-reg0)
		}
	}
	for j, c := range cs {
		reportSpread(b, c.name, times[j])
		b.ReportMetric(float64(median(cpu[j]).Microseconds())/1000, c.name+"-cpu-ms")
		if registry != 0 {
			b.ReportMetric(float64(median(reg[j]).Microseconds())/1000, c.name+"-registry-cpu-ms")
		}
	}
}

// reportSpread reports the median, fastest and slowest of runs as metrics named after who.
func reportSpread(b *testing.B, who string, runs []time.Duration) {
	s := append([]time.Duration(nil), runs...)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	b.ReportMetric(float64(med.Microseconds())/1000, who+"-median-ms")
	b.ReportMetric(float64(s[0].Microseconds())/1000, who+"-min-ms")
	b.ReportMetric(float64(s[len(s)-1].Microseconds())/1000, who+"-max-ms")
	b.ReportMetric(float64(len(s)), who+"-runs")
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
			for i := 0; i < b.N; i++ {
				os.RemoveAll(w.home)
				os.Remove(filepath.Join(w.project, "murmur.lock"))
				os.RemoveAll(filepath.Join(w.project, "tools"))
				rss = max(rss, runPeak(b, w.cmd("pull", "-q", "--no-precompile", "--store", store, "bench/"+c.artifact+"@1.0.0")))
			}
			b.ReportMetric(rss, "maxrss-MiB")
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
	os.WriteFile(filepath.Join(w.project, ".murmur", "config.yaml"), []byte("stores: [\""+store+"\"]\n"), 0o644)
	os.WriteFile(filepath.Join(w.project, "murmur.yaml"), []byte(capsuleYAML(names...)), 0o644)
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
	oras := orasPath(b)
	cold(false)
	runTimed(b, w.cmd("pull", "-q")) // compiles the one module all 20 share
	out := filepath.Join(dir, "oras")
	interleaveOn(b, reg.PID(),
		// --no-precompile leaves the compiled cache alone: it stays warm for the third side.
		contender{"mur", func() { cold(true) }, func(b *testing.B) { runTimed(b, w.cmd("pull", "-q", "--no-precompile")) }},
		contender{"oras", func() { os.RemoveAll(out) }, func(b *testing.B) { orasPulls(b, oras, refs, out, dir) }},
		contender{"mur-compiled-warm", func() { cold(true) }, func(b *testing.B) { runTimed(b, w.cmd("pull", "-q")) }},
	)
}

// BenchmarkProjectRTT pulls a project cold through a proxy that puts a 20 ms round trip between
// the client and docker-registry (a registry in the same region; see proxytest.Options.RTT): 20
// artifacts of about 800 KB against 20 `oras pull` processes 4 at a time through the same proxy,
// and 100 artifacts alone. The proxy's request log of each mur run says where its time goes:
// when the first request left, when the manifests and the blobs were all in, how many requests
// over how many connections, and how many round trips lie before the first blob byte and before
// the last blob request (roundTrips); each as the median over the rounds.
//
// 20-zstd is the same 20 packed with `mur pack --compression zstd`, whose payloads inflate in
// about a third of deflate's CPU. Beside both runs floorPull, the least any client can do for
// the same 20 through the same proxy: it says how far the machine lets a row's target reach.
func BenchmarkProjectRTT(b *testing.B) {
	b.Run("20", func(b *testing.B) { benchProjectRTT(b, 20, true, artifact.Deflate) })
	b.Run("20-zstd", func(b *testing.B) { benchProjectRTT(b, 20, true, artifact.Zstd) })
	b.Run("100", func(b *testing.B) { benchProjectRTT(b, 100, false, artifact.Deflate) })
}

func benchProjectRTT(b *testing.B, n int, withOras bool, compression artifact.Compression) {
	reg := registrytest.Start(b)
	proxy := proxytest.Start(b, reg.Addr(), proxytest.Options{RTT: 20 * time.Millisecond})
	dir := b.TempDir()
	w := newWorld(b)
	wasm := guesttest.Build(b, "hello")
	var names, refs []string
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("r%03d", i)
		f := filepath.Join(dir, artifact.FileName(name, "1.0.0"))
		if err := os.WriteFile(f, artifacttest.Spec{Name: name, Version: "1.0.0", Wasm: wasm, Compression: compression}.Zip(), 0o644); err != nil {
			b.Fatal(err)
		}
		runTimed(b, w.cmd("push", f, "--scope", "bench", "--store", "oci://"+reg.Addr()+"/murmur"))
		os.Remove(f)
		names = append(names, "bench/"+name+"@1.0.0")
		refs = append(refs, proxy.Addr()+"/murmur/bench/"+name+":1.0.0")
	}
	store := "oci://" + proxy.Addr() + "/murmur"
	os.WriteFile(filepath.Join(w.project, ".murmur", "config.yaml"), []byte("stores: [\""+store+"\"]\n"), 0o644)
	os.WriteFile(filepath.Join(w.project, "murmur.yaml"), []byte(capsuleYAML(names...)), 0o644)
	cold := func() {
		os.RemoveAll(w.home)
		os.Remove(filepath.Join(w.project, "murmur.lock"))
		os.RemoveAll(filepath.Join(w.project, "tools"))
		proxy.ResetLog()
	}
	phases := map[string][]time.Duration{}
	cs := []contender{{"mur", cold, func(b *testing.B) {
		start := time.Now()
		c := w.cmd("pull", "-q", "--no-precompile")
		runTimed(b, c)
		phases["cpu"] = append(phases["cpu"], cpuOf(c))
		for k, v := range timeline(proxy.Log(), start) {
			phases[k] = append(phases[k], v)
		}
		phases["requests"] = append(phases["requests"], time.Duration(len(proxy.Log())))
		first, last := roundTrips(proxy.Log(), proxy.Options().RTT)
		phases["round-trips-first-blob"] = append(phases["round-trips-first-blob"], time.Duration(first))
		phases["round-trips-last-blob"] = append(phases["round-trips-last-blob"], time.Duration(last))
		phases["connections"] = append(phases["connections"], time.Duration(proxy.Connections()))
	}}}
	var orasCPU []time.Duration
	if withOras {
		oras := orasPath(b)
		out := filepath.Join(dir, "oras")
		cs = append(cs, contender{"oras", func() { os.RemoveAll(out) }, func(b *testing.B) {
			orasCPU = append(orasCPU, orasPulls(b, oras, refs, out, dir))
		}})
		floorOut := filepath.Join(dir, "floor")
		cs = append(cs, contender{"floor", func() { os.RemoveAll(floorOut) }, func(b *testing.B) {
			floorPull(b, "http://"+proxy.Addr(), floorRepos(refs), floorOut)
		}})
	}
	interleaveOn(b, reg.PID(), cs...)
	// Peak RSS from one more, untimed, pull: runPeak reads /proc as the pull runs (a child's
	// rusage would count the test process's own memory, which the fork started it with).
	cold()
	b.ReportMetric(runPeak(b, w.cmd("pull", "-q", "--no-precompile")), "mur-maxrss-MiB")
	if len(orasCPU) > 0 {
		b.ReportMetric(float64(median(orasCPU).Microseconds())/1000, "oras-cpu-ms")
	}
	// The floor of the pull's own work: inflating every payload once, on one core, which its
	// check of each payload's CRC-32 (and staging into tools/) cannot do without.
	b.ReportMetric(float64(inflateAll(b, wasm, n, compression).Microseconds())/1000, "inflate-one-core-ms")
	for k, v := range phases {
		med := median(v)
		if k == "requests" || k == "connections" || strings.HasPrefix(k, "round-trips") {
			b.ReportMetric(float64(med), "mur-"+k)
			continue
		}
		b.ReportMetric(float64(med.Microseconds())/1000, "mur-"+k+"-ms")
	}
}

// timeline reads a pull's request log: when, after start, its first request arrived, its ping
// and token were answered, and its last manifest, last provenance look-up and last blob were in.
func timeline(log []proxytest.Logged, start time.Time) map[string]time.Duration {
	out := map[string]time.Duration{}
	last := func(k string, t time.Time) {
		if d := t.Sub(start); d > out[k] {
			out[k] = d
		}
	}
	for i, l := range log {
		if i == 0 {
			out["first-request"] = l.Start.Sub(start)
		}
		switch {
		case l.Path == "/v2/" || l.Path == "/v2":
			last("ping", l.End)
		case strings.Contains(l.Path, "/referrers/") || strings.Contains(l.Path, "/manifests/sha256-"):
			// The provenance look-ups: the referrers API, or its fallback tag.
			last("referrers", l.End)
		case strings.Contains(l.Path, "/manifests/"):
			last("manifests", l.End)
		case strings.Contains(l.Path, "/blobs/"):
			last("blobs", l.End)
		}
	}
	return out
}

// orasPulls is the peer of a project pull: one `oras pull` process per ref, 4 at a time, each
// into its own folder under out, with HOME set to home so no user config is read. It returns
// the CPU time the processes took together.
func orasPulls(b *testing.B, oras string, refs []string, out, home string) time.Duration {
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	var cpu atomic.Int64
	for j, r := range refs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			c := exec.Command(oras, "pull", "--plain-http", "--no-tty", "-o", filepath.Join(out, strconv.Itoa(j)), r)
			c.Env = append(os.Environ(), "HOME="+home)
			if o, err := c.CombinedOutput(); err != nil {
				b.Errorf("oras pull %s: %v\n%s", r, err, o)
			}
			cpu.Add(int64(cpuOf(c)))
		}()
	}
	wg.Wait()
	return time.Duration(cpu.Load())
}

// inflateAll times inflating the payload of n artifacts packed from wasm, one after another in
// this process, as a pull's checks must.
func inflateAll(b *testing.B, wasm []byte, n int, compression artifact.Compression) time.Duration {
	zipped := artifacttest.Spec{Name: "inflate", Version: "1.0.0", Wasm: wasm, Compression: compression}.Zip()
	start := time.Now()
	for i := 0; i < n; i++ {
		a, err := artifact.Read(bytes.NewReader(zipped), int64(len(zipped)))
		if err != nil {
			b.Fatal(err)
		}
		rc, err := a.OpenPayload()
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, rc)
		rc.Close()
	}
	return time.Since(start)
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

// BenchmarkVerify re-hashes 32 blobs of 16 MiB, alternately: `mur verify` (every core, each
// blob read once for its hash and its zip's directory), a single-goroutine Go hash of the same files,
// and coreutils sha256sum.
func BenchmarkVerify(b *testing.B) {
	dir := b.TempDir()
	w := newWorld(b)
	store := "oci-layout:" + filepath.Join(dir, "store")
	var names []string
	const n, size = 32, 16 << 20
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("v%02d", i)
		f := artifacttest.File(b, dir, name, "1.0.0", artifacttest.Module(size, uint64(i)))
		runTimed(b, w.cmd("push", f, "--scope", "bench", "--store", store))
		os.Remove(f)
		names = append(names, "bench/"+name+"@1.0.0")
	}
	os.WriteFile(filepath.Join(w.project, ".murmur", "config.yaml"), []byte("stores: [\""+store+"\"]\n"), 0o644)
	os.WriteFile(filepath.Join(w.project, "murmur.yaml"), []byte(capsuleYAML(names...)), 0o644)
	runTimed(b, w.cmd("pull", "-q", "--no-precompile"))
	files, _ := filepath.Glob(filepath.Join(w.home, "cas", "blobs", "sha256", "*"))
	buf := make([]byte, 1<<20)
	interleave(b,
		contender{"mur", nil, func(b *testing.B) { runTimed(b, w.cmd("verify", "-q")) }},
		contender{"go-serial", nil, func(b *testing.B) {
			for _, f := range files {
				fh, err := os.Open(f)
				if err != nil {
					b.Fatal(err)
				}
				h := sha256.New()
				io.CopyBuffer(h, fh, buf)
				fh.Close()
			}
		}},
		contender{"sha256sum", nil, func(b *testing.B) { runTimed(b, exec.Command("sha256sum", files...)) }},
	)
}

// BenchmarkRunHello runs the hello guest as a whole process: mur with a warm compiled cache
// beside a bare wazero program with a warm cache, and mur with a cold cache beside the bare
// program with an empty one and beside mur compiling with one worker.
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

	dropCompiled := func() { os.RemoveAll(filepath.Join(w.home, "compiled")) }
	b.Run("warm", func(b *testing.B) {
		runTimed(b, w.cmd("run", "hello"))
		interleave(b,
			contender{"mur", nil, func(b *testing.B) { runTimed(b, w.cmd("run", "hello")) }},
			contender{"bare-wazero", nil, func(b *testing.B) { runTimed(b, exec.Command(bare, bareCache, wasmPath)) }},
		)
	})
	bareCold := filepath.Join(dir, "bare-cold-cache")
	b.Run("cold", func(b *testing.B) {
		interleave(b,
			contender{"mur", dropCompiled, func(b *testing.B) { runTimed(b, w.cmd("run", "hello")) }},
			// Bare wazero compiling the module into an empty cache, as mur's cold run does.
			contender{"bare-wazero", func() { os.RemoveAll(bareCold) }, func(b *testing.B) { runTimed(b, exec.Command(bare, bareCold, wasmPath)) }},
			contender{"mur-1-worker", dropCompiled, func(b *testing.B) {
				c := w.cmd("run", "hello")
				c.Env = append(c.Env, "MUR_COMPILE_WORKERS=1")
				runTimed(b, c)
			}},
		)
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
	store := "oci://" + proxy.Addr() + "/murmur"
	var names []string
	for i := 0; i < 50; i++ {
		name := "j" + string(rune('a'+i/26)) + string(rune('a'+i%26))
		f := artifacttest.File(b, dir, name, "1.0.0", artifacttest.Module(128<<10+i, uint64(128<<10+i)))
		runTimed(b, w.cmd("push", f, "--scope", "bench", "--store", push))
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

func sha256File(b testing.TB, path string) string {
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
	return peerPath(b, "crane", "github.com/google/go-containerregistry/cmd/crane@v0.22.1")
}

// orasPath installs oras at bench time (never vendored) and returns its path.
func orasPath(b *testing.B) string { return peerPath(b, "oras", "oras.land/oras/cmd/oras@v1.3.6") }

func peerPath(b *testing.B, name, module string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	bin := filepath.Join(os.TempDir(), "mur-bench-bin")
	p := filepath.Join(bin, name)
	if _, err := os.Stat(p); err == nil {
		return p
	}
	c := exec.Command("go", "install", module)
	c.Env = append(os.Environ(), "GOBIN="+bin)
	start := time.Now()
	if out, err := c.CombinedOutput(); err != nil {
		b.Fatalf("installing %s: %v\n%s", name, err, out)
	}
	b.Logf("installed %s in %s", name, time.Since(start))
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
