package main

import (
	"fmt"
	"io"
)

// scaleSizes are the sub-benchmarks of BenchmarkScale, smallest first.
var scaleSizes = []string{"20", "100", "300", "1000"}

// Issue 39's targets for the scale rows.
const (
	perArtifactGrowth = 1.1 // cold-pull CPU per artifact at 1,000 over that at 100
	maxRSSAt1000MiB   = 64  // peak RSS of a cold pull of 1,000
	maxLockWrites     = 2   // writes of murmur.lock in one pull
)

// writeScale writes the rows of BenchmarkScale: what a cold and a warm pull cost as the project
// grows, and the targets on that growth.
func writeScale(w io.Writer, res map[string]result) {
	var got []string
	for _, n := range scaleSizes {
		if _, ok := res["BenchmarkScale/"+n]; ok {
			got = append(got, n)
		}
	}
	if len(got) == 0 {
		return
	}
	fmt.Fprintln(w, "## Cost as the project grows")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "A cold `mur pull --no-precompile` of projects of distinct 16 KiB artifacts from docker-registry")
	fmt.Fprintln(w, "on loopback, then the same pull warm (the lock and the CAS hold everything). mur's CPU and peak")
	fmt.Fprintln(w, "RSS are its own (ru_maxrss, the process started from a small launcher); CPU per artifact leaves")
	fmt.Fprintln(w, "out what the same command costs in a project that declares nothing; murmur.lock's writes are")
	fmt.Fprintln(w, "counted by inotify, the most in one pull.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| artifacts | cold: CPU per artifact | cold: CPU / wall | registry CPU | murmur.lock writes | peak RSS | warm locked pull: CPU / wall | warm: lock writes |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, n := range got {
		v := res["BenchmarkScale/"+n].metrics
		fmt.Fprintf(w, "| %s | %.2f ms | %s / %s | %s | %s | %.0f MiB | %s / %s | %s |\n", n, v["cold-cpu-per-artifact-ms"],
			msCell(v["cold-cpu-ms"]), msCell(v["cold-median-ms"]), msCell(v["cold-registry-cpu-ms"]), count(v, "lock-writes"),
			v["maxrss-MiB"], msCell(v["warm-cpu-ms"]), msCell(v["warm-median-ms"]), count(v, "warm-lock-writes"))
	}
	fmt.Fprintln(w)
	if a, ok := res["BenchmarkScale/100"]; ok {
		if b, ok := res["BenchmarkScale/1000"]; ok {
			r := b.metrics["cold-cpu-per-artifact-ms"] / a.metrics["cold-cpu-per-artifact-ms"]
			fmt.Fprintf(w, "- Cold-pull CPU per artifact at 1,000 artifacts over that at 100: %.2f× (target ≤ %.1f: %s).\n", r, perArtifactGrowth, yes(r <= perArtifactGrowth))
		}
	}
	if b, ok := res["BenchmarkScale/1000"]; ok {
		rss := b.metrics["maxrss-MiB"]
		fmt.Fprintf(w, "- Peak RSS of a cold pull of 1,000 artifacts: %.0f MiB (target < %d MiB: %s).\n", rss, maxRSSAt1000MiB, yes(rss < maxRSSAt1000MiB))
	}
	most, measured := 0.0, false
	for _, n := range got {
		if v, ok := res["BenchmarkScale/"+n].metrics["lock-writes"]; ok {
			most, measured = max(most, v), true
		}
	}
	if measured {
		fmt.Fprintf(w, "- murmur.lock written at most %.0f times in one cold pull, at every size (target ≤ %d: %s).\n", most, maxLockWrites, yes(most <= maxLockWrites))
	}
}

// count is a counted metric, or "—" when the run could not count it (not on Linux).
func count(v map[string]float64, k string) string {
	if c, ok := v[k]; ok {
		return fmt.Sprintf("%.0f", c)
	}
	return "—"
}
