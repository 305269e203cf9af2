// Command benchreport turns `go test -bench` output into BENCHMARKS.md: each figure beside its
// peer measured in the same run, as a ratio against the target the spec sets.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"
)

type result struct {
	nsPerOp float64
	metrics map[string]float64
}

var line = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)

func parse(r io.Reader) (map[string]result, []string) {
	out := map[string]result{}
	var raw []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		l := sc.Text()
		m := line.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		raw = append(raw, l)
		res := result{metrics: map[string]float64{}}
		f := strings.Fields(m[2])
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			if f[i+1] == "ns/op" {
				res.nsPerOp = v
			} else {
				res.metrics[f[i+1]] = v
			}
		}
		out[m[1]] = res
	}
	return out, raw
}

type comparison struct {
	what, subject, peer, target string
	// ratio computes the figure from the two results; ok says whether it meets the target.
	ratio func(s, p result) float64
	ok    func(r float64) bool
	unit  string
}

func faster(s, p result) float64 { return p.nsPerOp / s.nsPerOp } // >1: subject is faster
func slower(s, p result) float64 { return s.nsPerOp / p.nsPerOp } // <1: subject is faster

func main() {
	res, raw := parse(os.Stdin)
	cmp := []comparison{
		{"CAS ingest of 256 MiB vs io.Copy with a sha256 tee (+fsync)", "BenchmarkIngest256MiB", "BenchmarkPlainCopyTee256MiB", "≥ 0.9", faster, func(r float64) bool { return r >= 0.9 }, "× speed"},
		{"CAS VerifyAll of 1 GiB in 64 blobs (the work of `mur cache verify`) vs one goroutine hashing", "BenchmarkVerifyAll1GiB", "BenchmarkSerialHash1GiB", "≥ 1.9", faster, func(r float64) bool { return r >= 1.9 }, "× speed"},
		{"sandbox compile: cold vs warm cache", "BenchmarkWarmCompile", "BenchmarkColdCompile", "≥ 5", faster, func(r float64) bool { return r >= 5 }, "× speed"},
		{"cold pull of 64 MiB: GitHub source (302 to storage) vs docker-registry", "BenchmarkSourcePull64MiB/sources", "BenchmarkSourcePull64MiB/stores", "bandwidth-bound", faster, func(r float64) bool { return r > 0.5 }, "× speed"},
		{"50 small pulls over a 50 ms round trip: --jobs 4 (32 in flight) vs --jobs 1 (8)", "BenchmarkPullJobs/jobs-4", "BenchmarkPullJobs/jobs-1", "> 1", faster, func(r float64) bool { return r > 1 }, "× speed"},
		{"128 MiB blob, every connection capped at 16 MiB/s: 4 connections vs 1", "BenchmarkParallelRanges128MiB/conns-4", "BenchmarkParallelRanges128MiB/conns-1", "≥ 3", faster, func(r float64) bool { return r >= 3 }, "× speed"},
	}
	fmt.Println("# Benchmarks")
	fmt.Println()
	host, _ := os.Hostname()
	fmt.Printf("Run by `make bench` on %s: %s/%s, %d cores, %s, host %s.\n",
		time.Now().UTC().Format("2006-01-02"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version(), host)
	if cpu := cpuModel(); cpu != "" {
		fmt.Printf("CPU: %s.\n", cpu)
	}
	fmt.Println()
	fmt.Println("CPU is user and system time of each side's processes (median), which other work on a shared")
	fmt.Println("machine moves far less than wall time; in parentheses, the registry's CPU over each side's")
	fmt.Println("pulls, where it shares the machine.")
	fmt.Println()
	fmt.Println("| comparison | mur | peer | ratio | target | met | CPU mur / peer |")
	fmt.Println("| --- | --- | --- | --- | --- | --- | --- |")
	for _, c := range cmp {
		s, ok1 := res[c.subject]
		p, ok2 := res[c.peer]
		if !ok1 || !ok2 {
			fmt.Printf("| %s | — | — | not measured | %s | — | — |\n", c.what, c.target)
			continue
		}
		r := c.ratio(s, p)
		met := "no"
		if c.ok(r) {
			met = "yes"
		}
		fmt.Printf("| %s | %s | %s | %.2f %s | %s | %s | — |\n", c.what, dur(s.nsPerOp), dur(p.nsPerOp), r, c.unit, c.target, met)
	}
	for _, r := range []struct {
		what, bench, subject, peer, target string
		ok                                 func(float64) bool
		unit                               string
	}{
		{"`mur verify` of 512 MiB (32 blobs, each read once for its hash and its zip's directory) vs a single-core Go hash", "BenchmarkVerify", "mur", "go-serial", "≥ 1.75", func(r float64) bool { return r >= 1.75 }, "× speed"},
		{"`mur verify` of the same 512 MiB vs sha256sum", "BenchmarkVerify", "mur", "sha256sum", "> 1", func(r float64) bool { return r > 1 }, "× speed"},
		{"cold `mur pull --no-precompile` of 20 artifacts of ~800 KB vs 20 `oras pull` processes, 4 at a time (loopback)", "BenchmarkProject20", "mur", "oras", "≥ 1.5", func(r float64) bool { return r >= 1.5 }, "× speed"},
		{"cold `mur pull --no-precompile` of the same 20 over a 20 ms round trip vs 20 `oras pull` processes, 4 at a time, through the same proxy", "BenchmarkProjectRTT/20", "mur", "oras", "≥ 2.8", func(r float64) bool { return r >= 2.8 }, "× speed"},
		{"the protocol's floor for the same 20 over the same proxy (one in-process client: a ping, every manifest and blob at once, hash, inflate and write each payload; no lock, provenance look-up, fsync or check) vs the same `oras pull` processes: the most any client can reach here", "BenchmarkProjectRTT/20", "floor", "oras", "—", nil, "× speed"},
		{"the same over a 20 ms round trip, the 20 packed with zstd (`mur pack --compression zstd`)", "BenchmarkProjectRTT/20-zstd", "mur", "oras", "≥ 3.3", func(r float64) bool { return r >= 3.3 }, "× speed"},
		{"the protocol's floor for the 20 packed with zstd vs the same `oras pull` processes", "BenchmarkProjectRTT/20-zstd", "floor", "oras", "—", nil, "× speed"},
		{"default `mur pull` of the same 20, compiled cache warm, vs the same with --no-precompile", "BenchmarkProject20", "mur-compiled-warm", "mur", "≤ 1.1", func(r float64) bool { return r <= 1.1 }, "× time"},
		{"cold `mur run` of a 2.6 MB Go guest (compile included) vs the same with one compilation worker", "BenchmarkRunHello/cold", "mur", "mur-1-worker", "≥ 1.5", func(r float64) bool { return r >= 1.5 }, "× speed"},
		{"cold `mur run` of the same guest vs bare wazero compiling it into an empty cache, whole process", "BenchmarkRunHello/cold", "mur", "bare-wazero", "≥ 1.5", func(r float64) bool { return r >= 1.5 }, "× speed"},
		{"warm `mur run hello` vs bare wazero with its compilation cache, whole process", "BenchmarkRunHello/warm", "mur", "bare-wazero", "≤ 0.9 (stretch)", func(r float64) bool { return r <= 0.9 }, "× time"},
		{"cold `mur pull --no-precompile` of 20 attested artifacts (~64 KiB) from the GitHub test server, `provenance: require` vs `off`", "BenchmarkProvenancePull20", "provenance", "off", "—", nil, "× time"},
		{"warm locked pull of the same 20, the lock recording provenance vs not, whole process", "BenchmarkProvenanceWarm20", "provenance", "off", "≤ 1.1 (parity)", func(r float64) bool { return r <= 1.1 }, "× time"},
	} {
		m, ok := res[r.bench]
		if !ok {
			continue
		}
		sm, pm := m.metrics[r.subject+"-median-ms"], m.metrics[r.peer+"-median-ms"]
		ratio := pm / sm
		if r.unit == "× time" {
			ratio = sm / pm
		}
		met := "no"
		switch {
		case r.ok == nil: // measured, with no target to meet
			met = "—"
		case r.ok(ratio):
			met = "yes"
		}
		fmt.Printf("| %s, median of %.0f alternating rounds (%s %.0f–%.0f ms, %s %.0f–%.0f ms) | %.0fms | %.0fms | %.2f %s | %s | %s | %s |\n",
			r.what, m.metrics[r.subject+"-runs"], r.subject, m.metrics[r.subject+"-min-ms"], m.metrics[r.subject+"-max-ms"],
			r.peer, m.metrics[r.peer+"-min-ms"], m.metrics[r.peer+"-max-ms"], sm, pm, ratio, r.unit, r.target, met, cpuCell(m, r.subject, r.peer))
	}
	// A warm run against a cold one: two sub-benchmarks of the same run, so no shared rounds.
	if w, ok := res["BenchmarkRunHello/warm"]; ok {
		if c, ok := res["BenchmarkRunHello/cold"]; ok {
			wm, cm := w.metrics["mur-median-ms"], c.metrics["mur-median-ms"]
			met := "no"
			if cm/wm >= 5 {
				met = "yes"
			}
			fmt.Printf("| warm `mur run hello` vs a cold one (compile included), whole process, medians of the two rows above | %.0fms | %.0fms | %.2f × speed | ≥ 5 | %s | %.0f / %.0f ms |\n",
				wm, cm, cm/wm, met, w.metrics["mur-cpu-ms"], c.metrics["mur-cpu-ms"])
		}
	}
	for _, size := range []string{"256MiB", "64MiB"} {
		m, ok := res["BenchmarkColdPull"+size]
		if !ok {
			continue
		}
		mur, crane := m.metrics["mur-median-ms"], m.metrics["crane-median-ms"]
		r := crane / mur
		met := "no"
		if r >= 1.3 {
			met = "yes"
		}
		target := "≥ 1.3"
		if size != "256MiB" {
			target, met = "—", "—"
		}
		fmt.Printf("| cold `mur pull` of one %s artifact outside a project (durable in the CAS, payload checked) vs `crane blob` of the same blob, median of %.0f alternating runs (mur %.0f–%.0f ms, crane %.0f–%.0f ms) | %.0fms | %.0fms | %.2f × speed | %s | %s | %s |\n",
			size, m.metrics["mur-runs"], m.metrics["mur-min-ms"], m.metrics["mur-max-ms"], m.metrics["crane-min-ms"], m.metrics["crane-max-ms"], mur, crane, r, target, met, cpuCell(m, "mur", "crane"))
	}
	fmt.Println()
	for _, size := range []string{"64MiB", "1GiB"} {
		if m, ok := res["BenchmarkPullPeakRSS/"+size]; ok {
			met := "no"
			if m.metrics["maxrss-MiB"] < 32 {
				met = "yes"
			}
			fmt.Printf("- Peak RSS of a cold `mur pull` of %s: %.0f MiB (target < 32 MiB, flat: %s).\n", size, m.metrics["maxrss-MiB"], met)
		}
	}
	if load := os.Getenv("BENCH_LOAD"); load != "" {
		fmt.Printf("- Load average when the run started (other work shares this machine): %s.\n", load)
	}
	for _, n := range []string{"20", "20-zstd", "100"} {
		m, ok := res["BenchmarkProjectRTT/"+n]
		if !ok {
			continue
		}
		v := m.metrics
		n, packed := strings.CutSuffix(n, "-zstd")
		what := n + " artifacts"
		if packed {
			what += " packed with zstd"
		}
		fmt.Printf("- Cold pull of %s over a 20 ms round trip, median of %.0f rounds: %.0f ms (%.0f–%.0f ms). From its request log: first request at %.0f ms (process start, config, lock), ping answered at %.0f ms, last manifest at %.0f ms, last provenance look-up at %.0f ms, last blob at %.0f ms; %.0f requests over %.0f connections.",
			what, v["mur-runs"], v["mur-median-ms"], v["mur-min-ms"], v["mur-max-ms"], v["mur-first-request-ms"], v["mur-ping-ms"], v["mur-manifests-ms"], v["mur-referrers-ms"], v["mur-blobs-ms"], v["mur-requests"], v["mur-connections"])
		if cpu, ok := v["mur-cpu-ms"]; ok {
			fmt.Printf(" CPU: mur took %.0f ms of it (user and system, on 2 cores shared with the registry and the proxy); inflating the %s payloads once, on one core, takes %.0f ms", cpu, n, v["inflate-one-core-ms"])
			if o, ok := v["oras-cpu-ms"]; ok {
				fmt.Printf("; the %s `oras pull` processes took %.0f ms together", n, o)
			}
			if r, ok := v["mur-registry-cpu-ms"]; ok {
				fmt.Printf("; the registry took %.0f ms serving mur", r)
				if o, ok := v["oras-registry-cpu-ms"]; ok {
					fmt.Printf(" (%.0f ms serving oras)", o)
				}
			}
			fmt.Print(".")
		}
		if rss, ok := v["mur-maxrss-MiB"]; ok {
			fmt.Printf(" Peak RSS of mur: %.0f MiB (its downloads run at once, each with its own buffers).", rss)
		}
		fmt.Println()
	}
	if w, ok := res["BenchmarkWarmLockedPull20"]; ok {
		fmt.Printf("- Warm locked pull of a 20-artifact project, whole process: %s, %.0f network requests.\n", dur(w.nsPerOp), w.metrics["requests/op"])
	}
	for _, size := range []string{"64MiB", "256MiB"} {
		if m, ok := res["BenchmarkColdPull"+size]; ok {
			fmt.Printf("- Peak RSS of a cold pull of %s: mur %.0f MiB, crane %.0f MiB.", size, m.metrics["mur-maxrss-MiB"], m.metrics["crane-maxrss-MiB"])
			if cpu, ok := m.metrics["mur-cpu-ms"]; ok {
				// Both write the same bytes, so the ratio of their CPU is the ratio per byte written.
				r := cpu / m.metrics["crane-cpu-ms"]
				met := "no"
				if r <= 1.5 {
					met = "yes"
				}
				fmt.Printf(" CPU (user and system, median): mur %.0f ms, crane %.0f ms: %.2f× crane's per byte written (target ≤ 1.5: %s).", cpu, m.metrics["crane-cpu-ms"], r, met)
			}
			fmt.Println()
		}
	}
	for _, c := range []struct{ name, what string }{
		{"1GiB-of-2GiB-cap", "a guest that grows to 1 GiB under a 2 GiB cap"},
		{"16MiB-default-cap", "a guest that stays small (16 MiB) under the default cap"},
	} {
		m, ok := res["BenchmarkRunMemory/mur-"+c.name]
		if !ok {
			continue
		}
		bare := res["BenchmarkRunMemory/bare-wazero-"+c.name]
		guest, rss := m.metrics["guest-MiB"], m.metrics["maxrss-MiB"]
		met := "no"
		if rss <= guest+128 {
			met = "yes"
		}
		fmt.Printf("- Peak RSS of `mur run` for %s: mur %.0f MiB for %.0f MiB of guest memory (target ≤ guest + 128 MiB: %s); bare wazero with its default memory %.0f MiB.\n",
			c.what, rss, guest, met, bare.metrics["maxrss-MiB"])
	}
	if m, ok := res["BenchmarkPackageInit"]; ok {
		fmt.Printf("- Package initialisation before main, fastest of 8 (GODEBUG=inittrace=1): mur %.1f ms and %.0f KiB; mur-provenance, which links sigstore-go, %.1f ms and %.0f KiB. mur starts it only when a bundle has to be verified.\n",
			m.metrics["mur-init-ms"], m.metrics["mur-init-KiB"], m.metrics["sigstore-init-ms"], m.metrics["sigstore-init-KiB"])
	}
	if m, ok := res["BenchmarkIngestPeakHeap1GiB"]; ok {
		fmt.Printf("- Peak heap during a 1 GiB CAS ingest: %.1f MiB.\n", m.metrics["peak-heap-MiB"])
	}
	if m, ok := res["BenchmarkParseMarshal1000"]; ok {
		fmt.Printf("- Parse and write back a 1,000-entry murmur.lock: %s.\n", dur(m.nsPerOp))
	}
	fmt.Println()
	fmt.Println("Profiles and measurements made by hand, which explain these rows (where the CPU goes, the write")
	fmt.Println("path, the protocol's floor, the cold run), are in [docs/performance.md](docs/performance.md).")
	fmt.Println()
	fmt.Println("## Raw results")
	fmt.Println()
	fmt.Println("```")
	for _, l := range raw {
		fmt.Println(l)
	}
	fmt.Println("```")
}

// cpuCell is the CPU column of a row: each side's CPU, and the registry's over each side's runs
// when measured; "—" for a row that measured none.
func cpuCell(m result, subject, peer string) string {
	sc, ok1 := m.metrics[subject+"-cpu-ms"]
	pc, ok2 := m.metrics[peer+"-cpu-ms"]
	if !ok1 || !ok2 {
		return "—"
	}
	cell := fmt.Sprintf("%.0f / %.0f ms", sc, pc)
	sr, ok1 := m.metrics[subject+"-registry-cpu-ms"]
	pr, ok2 := m.metrics[peer+"-registry-cpu-ms"]
	if ok1 && ok2 {
		cell += fmt.Sprintf(" (registry %.0f / %.0f ms)", sr, pr)
	}
	return cell
}

func dur(ns float64) string {
	return time.Duration(ns).Round(time.Microsecond * 10).String()
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "model name") {
			_, v, _ := strings.Cut(l, ":")
			return strings.TrimSpace(v)
		}
	}
	return ""
}
