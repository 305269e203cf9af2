package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// A run's lines, trimmed to the metrics the rows read.
const sample = `BenchmarkIngest256MiB-2   5   260000000 ns/op   1030 MB/s   300.0 cpu-ms/op
BenchmarkPlainCopyTee256MiB-2   5   400000000 ns/op   280.0 cpu-ms/op
BenchmarkProjectRTT/20-2   5   1 ns/op   500 mur-cpu-ms   100 mur-registry-cpu-ms   50 mur-proxy-cpu-ms   600 mur-median-ms   500 mur-min-ms   700 mur-max-ms   7 mur-runs   440 floor-cpu-ms   90 floor-registry-cpu-ms   40 floor-proxy-cpu-ms   400 floor-median-ms   7 floor-runs   700 oras-cpu-ms   120 oras-registry-cpu-ms   60 oras-proxy-cpu-ms   900 oras-median-ms   7 oras-runs   2 mur-lock-writes
BenchmarkScale/100-2   5   1 ns/op   2.0 cold-cpu-per-artifact-ms   230 cold-cpu-ms   1 lock-writes   40 maxrss-MiB   0 warm-lock-writes
BenchmarkScale/1000-2   5   1 ns/op   2.3 cold-cpu-per-artifact-ms   2330 cold-cpu-ms   3 lock-writes   70 maxrss-MiB   0 warm-lock-writes
`

func report(t *testing.T, in string) string {
	t.Helper()
	res, raw := parse(strings.NewReader(in))
	var out bytes.Buffer
	write(&out, res, raw, time.Unix(0, 0))
	return out.String()
}

// rowOf is the table row that begins with what.
func rowOf(t *testing.T, out, what string) string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "| "+what) {
			return l
		}
	}
	t.Fatalf("no row %q in:\n%s", what, out)
	return ""
}

func TestRowsPutCPUFirstAndHoldTheirTargets(t *testing.T) {
	out := report(t, sample)
	for what, want := range map[string]string{
		// In-package benchmarks: CPU per op beside ns/op; the figure is wall time.
		"CAS ingest of 256 MiB": "| 300 ms / 260 ms | 280 ms / 400 ms | — | 1.54 × speed | ≥ 0.9 | yes |",
		// Issue 39: mur's own CPU against the floor client's, at most 1.1 of it.
		"the same 20 over a 20 ms round trip: mur's own CPU vs the floor client's": "| 500 ms / 600 ms (500–700) | 440 ms / 400 ms | registry 100 / 90 ms; proxy 50 / 40 ms | 1.14 × CPU | ≤ 1.1 | no |",
		"the same: mur's own CPU vs the 20 `oras pull` processes'":                 "| 0.71 × CPU | ≤ 1 | yes |",
		// With what served each side: (500+100+50) / (700+120+60).
		"the same: mur, the registry and the proxy vs the oras side's": "| 0.74 × CPU, with what served it | ≤ 1 | yes |",
		// A row whose benchmark did not run says so rather than failing or passing.
		"CAS VerifyAll of 1 GiB": "| — | — | — | not measured | ≥ 1.9 | — |",
	} {
		if row := rowOf(t, out, what); !strings.Contains(row, want) {
			t.Errorf("row %q:\n%s\nwant it to contain\n%s", what, row, want)
		}
	}
	for _, want := range []string{
		"| 1000 | 2.30 ms | 2330 ms / 0.0 ms | 0.0 ms | 3 | 70 MiB |",
		"over that at 100: 1.15× (target ≤ 1.1: no)",
		"1,000 artifacts: 70 MiB (target < 64 MiB: no)",
		"murmur.lock written at most 3 times in one cold pull, at every size (target ≤ 2: no)",
		"murmur.lock written 2 times.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
}

func TestScaleTargetsMet(t *testing.T) {
	out := report(t, strings.NewReplacer("2.3 cold-cpu-per-artifact-ms", "2.1 cold-cpu-per-artifact-ms",
		"3 lock-writes", "2 lock-writes", "70 maxrss-MiB", "50 maxrss-MiB").Replace(sample))
	for _, want := range []string{
		"over that at 100: 1.05× (target ≤ 1.1: yes)",
		"1,000 artifacts: 50 MiB (target < 64 MiB: yes)",
		"at most 2 times in one cold pull, at every size (target ≤ 2: yes)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
}
