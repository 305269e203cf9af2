package main

// rows are the comparisons of BENCHMARKS.md's first table, each against the target the spec or
// an issue sets for it.
var rows = func() []row {
	in := func(bench string) side { return side{bench, ""} }
	rtt20 := func(name string) side { return side{"BenchmarkProjectRTT/20", name} }
	zstd := func(name string) side { return side{"BenchmarkProjectRTT/20-zstd", name} }
	s := func(bench, name string) side { return side{bench, name} }
	return []row{
		{"CAS ingest of 256 MiB vs io.Copy with a sha256 tee (+fsync)", in("BenchmarkIngest256MiB"), in("BenchmarkPlainCopyTee256MiB"), faster, "≥ 0.9", atLeast(0.9)},
		{"CAS VerifyAll of 1 GiB in 64 blobs (the work of `mur cache verify`) vs one goroutine hashing", in("BenchmarkVerifyAll1GiB"), in("BenchmarkSerialHash1GiB"), faster, "≥ 1.9", atLeast(1.9)},
		{"sandbox compile: warm cache vs cold", in("BenchmarkWarmCompile"), in("BenchmarkColdCompile"), faster, "≥ 5", atLeast(5)},
		{"cold pull of 64 MiB: GitHub source (302 to storage) vs docker-registry", s("BenchmarkSourcePull64MiB/sources", "mur"), s("BenchmarkSourcePull64MiB/stores", "mur"), faster, "bandwidth-bound", above(0.5)},
		{"50 small pulls over a 50 ms round trip: --jobs 4 (32 in flight) vs --jobs 1 (8)", s("BenchmarkPullJobs/jobs-4", "mur"), s("BenchmarkPullJobs/jobs-1", "mur"), faster, "> 1", above(1)},
		{"128 MiB blob, every connection capped at 16 MiB/s: 4 connections vs 1", s("BenchmarkParallelRanges128MiB/conns-4", "mur"), s("BenchmarkParallelRanges128MiB/conns-1", "mur"), faster, "≥ 3", atLeast(3)},
		{"`mur verify` of 512 MiB (32 blobs, each read once for its hash and its zip's directory) vs a single-core Go hash", s("BenchmarkVerify", "mur"), s("BenchmarkVerify", "go-serial"), faster, "≥ 1.75", atLeast(1.75)},
		{"`mur verify` of the same 512 MiB vs sha256sum", s("BenchmarkVerify", "mur"), s("BenchmarkVerify", "sha256sum"), faster, "> 1", above(1)},
		{"cold `mur pull --no-precompile` of 20 artifacts of ~800 KB vs 20 `oras pull` processes, 4 at a time (loopback)", s("BenchmarkProject20", "mur"), s("BenchmarkProject20", "oras"), faster, "≥ 1.5", atLeast(1.5)},
		{"cold `mur pull --no-precompile` of the same 20 over a 20 ms round trip vs 20 `oras pull` processes, 4 at a time, through the same proxy", rtt20("mur"), rtt20("oras"), faster, "≥ 2.8", atLeast(2.8)},
		{"the same 20 over a 20 ms round trip: mur's own CPU vs the floor client's", rtt20("mur"), rtt20("floor"), cpu, "≤ 1.1", atMost(1.1)},
		{"the same: mur's own CPU vs the 20 `oras pull` processes'", rtt20("mur"), rtt20("oras"), cpu, "≤ 1", atMost(1)},
		{"the same: mur, the registry and the proxy vs the oras side's", rtt20("mur"), rtt20("oras"), cpuTotal, "≤ 1", atMost(1)},
		{"the protocol's floor for the same 20 over the same proxy (one client process: a ping, every manifest and blob at once, hash, inflate and write each payload; no lock, provenance look-up, fsync or check) vs the same `oras pull` processes: the most any client can reach here", rtt20("floor"), rtt20("oras"), faster, "—", nil},
		{"the same over a 20 ms round trip, the 20 packed with zstd (`mur pack --compression zstd`)", zstd("mur"), zstd("oras"), faster, "≥ 3.3", atLeast(3.3)},
		{"the protocol's floor for the 20 packed with zstd vs the same `oras pull` processes", zstd("floor"), zstd("oras"), faster, "—", nil},
		{"default `mur pull` of the same 20, compiled cache warm, vs the same with --no-precompile", s("BenchmarkProject20", "mur-compiled-warm"), s("BenchmarkProject20", "mur"), slower, "≤ 1.1", atMost(1.1)},
		{"cold `mur run` of a 2.6 MB Go guest (compile included) vs the same with one compilation worker", s("BenchmarkRunHello/cold", "mur"), s("BenchmarkRunHello/cold", "mur-1-worker"), faster, "≥ 1.5", atLeast(1.5)},
		{"cold `mur run` of the same guest vs bare wazero compiling it into an empty cache, whole process", s("BenchmarkRunHello/cold", "mur"), s("BenchmarkRunHello/cold", "bare-wazero"), faster, "≥ 1.5", atLeast(1.5)},
		{"warm `mur run hello` vs bare wazero with its compilation cache, whole process", s("BenchmarkRunHello/warm", "mur"), s("BenchmarkRunHello/warm", "bare-wazero"), slower, "≤ 0.9 (stretch)", atMost(0.9)},
		{"warm `mur run hello` vs a cold one (compile included), whole process, medians of the two rows above", s("BenchmarkRunHello/warm", "mur"), s("BenchmarkRunHello/cold", "mur"), faster, "≥ 5", atLeast(5)},
		{"cold `mur pull --no-precompile` of 20 attested artifacts (~64 KiB) from the GitHub test server, `provenance: require` vs `off`", s("BenchmarkProvenancePull20", "provenance"), s("BenchmarkProvenancePull20", "off"), slower, "—", nil},
		{"warm locked pull of the same 20, the lock recording provenance vs not, whole process", s("BenchmarkProvenanceWarm20", "provenance"), s("BenchmarkProvenanceWarm20", "off"), slower, "≤ 1.1 (parity)", atMost(1.1)},
		{"cold `mur pull` of one 256 MiB artifact outside a project (durable in the CAS, payload checked) vs `crane blob` of the same blob", s("BenchmarkColdPull256MiB", "mur"), s("BenchmarkColdPull256MiB", "crane"), faster, "≥ 1.3", atLeast(1.3)},
		{"the same 256 MiB: mur's CPU vs crane's (both write the same bytes: CPU per byte written)", s("BenchmarkColdPull256MiB", "mur"), s("BenchmarkColdPull256MiB", "crane"), cpu, "≤ 1.5", atMost(1.5)},
		{"cold `mur pull` of one 64 MiB artifact, as above, vs `crane blob`", s("BenchmarkColdPull64MiB", "mur"), s("BenchmarkColdPull64MiB", "crane"), faster, "—", nil},
		{"the same 64 MiB: mur's CPU vs crane's", s("BenchmarkColdPull64MiB", "mur"), s("BenchmarkColdPull64MiB", "crane"), cpu, "≤ 1.5", atMost(1.5)},
	}
}()
