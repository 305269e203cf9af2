package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/murmur-nexus/mur/internal/cputime"
)

// The benchmarks measure whole processes, each beside its peer in the same run, so that `make
// bench` can report ratios: mur against crane, oras, sha256sum, a bare wazero program and the
// protocol's floor. CPU comes first: each side's CPU, user and system, beside its wall time, and
// the CPU of what serves it (the registry process; a latency proxy or test server in this
// process), which other work on a shared machine moves far less than wall time.
// docs/performance.md says how each row is measured.

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

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// usage is what the kernel accounted to one finished process: its CPU, user and system, and its
// peak resident memory in MiB (ru_maxrss).
type usage struct {
	cpu    time.Duration
	maxRSS float64
}

// measure runs c through testdata/rusage and returns its usage; it fails tb if c fails. Started
// from this process, c's ru_maxrss would be at least this process's own peak: Linux carries the
// parent's high-water mark into a child that it forks and execs. The small rusage program forks
// c instead and reports its own peak beside c's, and a figure not above it is refused.
func measure(tb testing.TB, c *exec.Cmd) usage {
	tb.Helper()
	report, err := os.CreateTemp("", "mur-rusage-*.json")
	if err != nil {
		tb.Fatal(err)
	}
	report.Close()
	defer os.Remove(report.Name())
	r := exec.Command(benchTool(tb, "rusage"), append([]string{report.Name(), c.Path}, c.Args[1:]...)...)
	r.Dir, r.Env, r.Stdin, r.Stdout, r.Stderr = c.Dir, c.Env, c.Stdin, c.Stdout, c.Stderr
	var out bytes.Buffer
	if r.Stdout == nil {
		r.Stdout = &out
	}
	if r.Stderr == nil {
		r.Stderr = &out
	}
	if err := r.Run(); err != nil {
		tb.Fatalf("%v: %v\n%s", c.Args, err, out.String())
	}
	return readUsage(tb, report.Name())
}

// readUsage reads the report of the rusage tool at path.
func readUsage(tb testing.TB, path string) usage {
	tb.Helper()
	var got struct {
		MaxRSS   int64 `json:"maxrss_kib"`
		User     int64 `json:"user_us"`
		Sys      int64 `json:"sys_us"`
		Launcher int64 `json:"launcher_maxrss_kib"`
	}
	if raw, err := os.ReadFile(path); err != nil || json.Unmarshal(raw, &got) != nil {
		tb.Fatalf("no usage report from the rusage tool in %s: %v", path, err)
	}
	if runtime.GOOS == "darwin" {
		got.MaxRSS /= 1024 // bytes there, KiB on Linux
	}
	if got.MaxRSS <= got.Launcher {
		tb.Fatalf("peak RSS %d KiB is not above the rusage tool's own %d KiB, so it may be the tool's", got.MaxRSS, got.Launcher)
	}
	return usage{cpu: time.Duration(got.User+got.Sys) * time.Microsecond, maxRSS: float64(got.MaxRSS) / 1024}
}

// runPeak runs c and returns its peak resident memory in MiB (see measure).
func runPeak(tb testing.TB, c *exec.Cmd) float64 { return measure(tb, c).maxRSS }

var (
	toolMu sync.Mutex
	tools  = map[string]string{}
)

// benchTool builds the program in testdata/name once per test binary, beside mur, and returns
// its path.
func benchTool(tb testing.TB, name string) string {
	tb.Helper()
	toolMu.Lock()
	defer toolMu.Unlock()
	if p, ok := tools[name]; ok {
		return p
	}
	p := filepath.Join(scratch, name)
	if out, err := exec.Command("go", "build", "-o", p, "./testdata/"+name).CombinedOutput(); err != nil {
		tb.Fatalf("building testdata/%s: %v\n%s", name, err, out)
	}
	tools[name] = p
	return p
}

// beside is what serves a benchmark's sides, whose CPU each side's runs are charged with: the
// registry process (its pid; 0 for none) and a server in this process, which served names
// ("proxy", "github"; "" for none). The served CPU is this process's over a run, when the side
// ran as child processes and this process only served them and waited. The harness's own part,
// starting the side's one process and reading a request log, is a few milliseconds, the same for
// every side (docs/performance.md).
type beside struct {
	registry int
	served   string
}

// sample is one run of one side: its wall time, its processes' CPU, and the CPU of what served it.
type sample struct{ wall, cpu, registry, served time.Duration }

// sample runs run and measures it. The side's CPU is that of the child processes run waited
// for; a side that started none ran in this process, and its CPU is this process's.
func (s beside) sample(tb testing.TB, run func()) sample {
	start, kids, self, reg := time.Now(), cputime.Children(), cputime.Self(), procCPU(s.registry)
	run()
	out := sample{wall: time.Since(start), cpu: cputime.Children() - kids, registry: procCPU(s.registry) - reg}
	own := cputime.Self() - self
	switch {
	case out.cpu == 0 && s.served != "":
		tb.Fatalf("a side ran in this process beside the %s: their CPU can't be told apart", s.served)
	case out.cpu == 0:
		out.cpu = own
	default:
		out.served = own
	}
	return out
}

// report reports the median, fastest and slowest wall time of runs and the median CPU of the
// side and of what served it, as metrics named after who: <who>-cpu-ms, <who>-registry-cpu-ms,
// <who>-<served>-cpu-ms, <who>-median-ms and so on.
func (s beside) report(b *testing.B, who string, runs []sample) {
	col := func(f func(sample) time.Duration) []time.Duration {
		out := make([]time.Duration, len(runs))
		for i, r := range runs {
			out[i] = f(r)
		}
		return out
	}
	reportSpread(b, who, col(func(r sample) time.Duration { return r.wall }))
	b.ReportMetric(ms(median(col(func(r sample) time.Duration { return r.cpu }))), who+"-cpu-ms")
	if s.registry != 0 {
		b.ReportMetric(ms(median(col(func(r sample) time.Duration { return r.registry }))), who+"-registry-cpu-ms")
	}
	if s.served != "" {
		b.ReportMetric(ms(median(col(func(r sample) time.Duration { return r.served }))), who+"-"+s.served+"-cpu-ms")
	}
}

// contender is one side of an interleaved benchmark: setup (untimed) then run (timed).
type contender struct {
	name  string
	setup func()
	run   func(b *testing.B)
}

// interleave runs each contender in turn, round after round, so that every side sees the same
// moments of a shared machine, and reports each side's wall time and CPU (beside.report). A
// benchmark run (b.N > 1) makes at least 7 rounds; ns/op is the sum of all sides and means
// nothing.
func interleave(b *testing.B, cs ...contender) { interleaveOn(b, beside{}, cs...) }

// interleaveOn is interleave with the CPU of what serves the sides.
func interleaveOn(b *testing.B, on beside, cs ...contender) {
	rounds := b.N
	if rounds > 1 {
		rounds = max(rounds, 7)
	}
	runs := make([][]sample, len(cs))
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
			runs[j] = append(runs[j], on.sample(b, func() { c.run(b) }))
		}
	}
	for j, c := range cs {
		on.report(b, c.name, runs[j])
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
	b.ReportMetric(ms(med), who+"-median-ms")
	b.ReportMetric(ms(s[0]), who+"-min-ms")
	b.ReportMetric(ms(s[len(s)-1]), who+"-max-ms")
	b.ReportMetric(float64(len(s)), who+"-runs")
}

// loop runs a b.N benchmark's body, each iteration's untimed setup then its timed run, and
// reports the timed runs as side who (beside.report).
func loop(b *testing.B, on beside, who string, setup, run func()) {
	var runs []sample
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if setup != nil {
			setup()
		}
		b.StartTimer()
		runs = append(runs, on.sample(b, run))
	}
	b.StopTimer()
	on.report(b, who, runs)
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
