// Command benchreport turns `go test -bench` output into BENCHMARKS.md: each figure beside its
// peer measured in the same run, CPU first, as a ratio against the target set for it.
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
	sc.Buffer(make([]byte, 64<<10), 1<<20)
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

func main() {
	res, raw := parse(os.Stdin)
	write(os.Stdout, res, raw, time.Now())
}

// write is the whole of BENCHMARKS.md for the results res, whose lines are raw.
func write(w io.Writer, res map[string]result, raw []string, now time.Time) {
	fmt.Fprintln(w, "# Benchmarks")
	fmt.Fprintln(w)
	host, _ := os.Hostname()
	fmt.Fprintf(w, "Run by `make bench` on %s: %s/%s, %d cores, %s, host %s.\n",
		now.UTC().Format("2006-01-02"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version(), host)
	if cpu := cpuModel(); cpu != "" {
		fmt.Fprintf(w, "CPU: %s.\n", cpu)
	}
	if load := os.Getenv("BENCH_LOAD"); load != "" {
		fmt.Fprintf(w, "Load average when the run started (other work shares this machine): %s.\n", load)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "CPU first: each cell gives a side's CPU, user and system time of its processes (median of the")
	fmt.Fprintln(w, "rounds), which other work on a shared machine moves far less than wall time, then its wall")
	fmt.Fprintln(w, "time. The serving column is the CPU of what served each side: the registry process, and the")
	fmt.Fprintln(w, "latency proxy or GitHub test server, which run in the benchmark's own process while every side")
	fmt.Fprintln(w, "runs as child processes. The figure is the ratio the target is set on: × CPU rows compare CPU,")
	fmt.Fprintln(w, "the others wall time. [docs/performance.md](docs/performance.md) says how each row is measured")
	fmt.Fprintln(w, "and keeps the profiles behind them.")
	fmt.Fprintln(w)
	writeTable(w, res, rows)
	fmt.Fprintln(w)
	writeScale(w, res)
	fmt.Fprintln(w)
	writeNotes(w, res)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "## Raw results")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "```")
	for _, l := range raw {
		fmt.Fprintln(w, l)
	}
	fmt.Fprintln(w, "```")
}

func dur(ns float64) string {
	return time.Duration(ns).Round(time.Microsecond * 10).String()
}

// msCell writes a figure in milliseconds, with no decimals once it is large enough.
func msCell(v float64) string {
	if v >= 100 {
		return fmt.Sprintf("%.0f ms", v)
	}
	return fmt.Sprintf("%.1f ms", v)
}

// msOf is metric k of v in milliseconds, or "—" when the run did not measure it.
func msOf(v map[string]float64, k string) string {
	if x, ok := v[k]; ok {
		return msCell(x)
	}
	return "—"
}

func yes(ok bool) string {
	if ok {
		return "yes"
	}
	return "no"
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
