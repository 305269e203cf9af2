package main

import (
	"fmt"
	"io"
	"strings"
)

// writeNotes writes the figures that are not a ratio against a peer: peak memory, where a pull's
// time goes, start-up costs.
func writeNotes(w io.Writer, res map[string]result) {
	fmt.Fprintln(w, "## Other figures")
	fmt.Fprintln(w)
	for _, size := range []string{"64MiB", "1GiB"} {
		if m, ok := res["BenchmarkPullPeakRSS/"+size]; ok {
			rss := m.metrics["maxrss-MiB"]
			fmt.Fprintf(w, "- Peak RSS of a cold `mur pull` of %s: %.0f MiB (target < 32 MiB, flat: %s), CPU %s.\n", size, rss, yes(rss < 32), msOf(m.metrics, "cpu-ms"))
		}
	}
	for _, size := range []string{"64MiB", "256MiB"} {
		if m, ok := res["BenchmarkColdPull"+size]; ok {
			fmt.Fprintf(w, "- Peak RSS of a cold pull of %s: mur %.0f MiB, crane %.0f MiB.\n", size, m.metrics["mur-maxrss-MiB"], m.metrics["crane-maxrss-MiB"])
		}
	}
	for _, n := range []string{"20", "20-zstd", "100"} {
		if m, ok := res["BenchmarkProjectRTT/"+n]; ok {
			writeRTTNote(w, n, m.metrics)
		}
	}
	if m, ok := res["BenchmarkWarmLockedPull20"]; ok {
		fmt.Fprintf(w, "- Warm locked pull of a 20-artifact project, whole process: CPU %s, wall %s, %.0f network requests.\n",
			msOf(m.metrics, "mur-cpu-ms"), msOf(m.metrics, "mur-median-ms"), m.metrics["requests/op"])
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
		fmt.Fprintf(w, "- Peak RSS of `mur run` for %s: mur %.0f MiB for %.0f MiB of guest memory (target ≤ guest + 128 MiB: %s), CPU %s; bare wazero with its default memory %.0f MiB, CPU %s.\n",
			c.what, rss, guest, yes(rss <= guest+128), msOf(m.metrics, "cpu-ms"), bare.metrics["maxrss-MiB"], msOf(bare.metrics, "cpu-ms"))
	}
	if m, ok := res["BenchmarkPackageInit"]; ok {
		fmt.Fprintf(w, "- Package initialisation before main, fastest of 8 (GODEBUG=inittrace=1): mur %.1f ms and %.0f KiB; mur-provenance, which links sigstore-go, %.1f ms and %.0f KiB. mur starts it only when a bundle has to be verified.\n",
			m.metrics["mur-init-ms"], m.metrics["mur-init-KiB"], m.metrics["sigstore-init-ms"], m.metrics["sigstore-init-KiB"])
	}
	if m, ok := res["BenchmarkIngestPeakHeap1GiB"]; ok {
		fmt.Fprintf(w, "- Peak heap during a 1 GiB CAS ingest: %.1f MiB.\n", m.metrics["peak-heap-MiB"])
	}
	if m, ok := res["BenchmarkParseMarshal1000"]; ok {
		fmt.Fprintf(w, "- Parse and write back a 1,000-entry murmur.lock: %s.\n", dur(m.nsPerOp))
	}
}

// writeRTTNote says where the time of a cold pull over a 20 ms round trip goes, from the proxy's
// request log, and what CPU each party took.
func writeRTTNote(w io.Writer, n string, v map[string]float64) {
	n, packed := strings.CutSuffix(n, "-zstd")
	what := n + " artifacts"
	if packed {
		what += " packed with zstd"
	}
	fmt.Fprintf(w, "- Cold pull of %s over a 20 ms round trip, median of %.0f rounds: %.0f ms (%.0f–%.0f ms). From its request log: first request at %.0f ms (process start, config, lock), ping answered at %.0f ms, last manifest at %.0f ms, last provenance look-up at %.0f ms, last blob at %.0f ms; %.0f requests over %.0f connections.",
		what, v["mur-runs"], v["mur-median-ms"], v["mur-min-ms"], v["mur-max-ms"], v["mur-first-request-ms"], v["mur-ping-ms"], v["mur-manifests-ms"], v["mur-referrers-ms"], v["mur-blobs-ms"], v["mur-requests"], v["mur-connections"])
	if lw, ok := v["mur-lock-writes"]; ok {
		fmt.Fprintf(w, " murmur.lock written %.0f times.", lw)
	}
	fmt.Fprintf(w, " CPU: mur %s, the registry %s and the proxy %s serving it; inflating the %s payloads once, on one core, takes %s",
		msOf(v, "mur-cpu-ms"), msOf(v, "mur-registry-cpu-ms"), msOf(v, "mur-proxy-cpu-ms"), n, msOf(v, "inflate-one-core-ms"))
	if o, ok := v["oras-cpu-ms"]; ok {
		fmt.Fprintf(w, "; the %s `oras pull` processes %s (registry %s, proxy %s)", n, msCell(o), msOf(v, "oras-registry-cpu-ms"), msOf(v, "oras-proxy-cpu-ms"))
	}
	if f, ok := v["floor-cpu-ms"]; ok {
		fmt.Fprintf(w, "; the floor client %s (registry %s, proxy %s)", msCell(f), msOf(v, "floor-registry-cpu-ms"), msOf(v, "floor-proxy-cpu-ms"))
	}
	fmt.Fprint(w, ".")
	if rss, ok := v["mur-maxrss-MiB"]; ok {
		fmt.Fprintf(w, " Peak RSS of mur: %.0f MiB.", rss)
	}
	fmt.Fprintln(w)
}
