#!/usr/bin/env bash
# make bench: every benchmark beside its peer in one run, written to BENCHMARKS.md as ratios.
# crane and oras are installed with `go install` when missing (never vendored). BenchmarkRunMemory
# runs a guest that grows to 1 GiB under mur and under a bare wazero program, whose default memory
# peaks near 4 GiB of RSS, and BenchmarkPullPeakRSS pulls 1 GiB: leave that much memory and a few
# GiB of disk free. BenchmarkScale pushes 1,000 small artifacts once and pulls projects of up to
# 1,000 of them. The machine's load average at the start goes into the report: other work on a
# shared machine moves every wall time, CPU time much less.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$(go env GOPATH)/bin:$PATH"
command -v crane >/dev/null || go install github.com/google/go-containerregistry/cmd/crane@v0.22.1
command -v oras >/dev/null || go install oras.land/oras/cmd/oras@v1.3.6
out=$(mktemp)
trap 'rm -f "$out"' EXIT
export BENCH_LOAD="$(cut -d' ' -f1-3 /proc/loadavg)"
go test -run '^$' -bench . -benchtime 5x -timeout 180m ./cas ./lock ./sandbox ./cmd/mur/e2e 2>&1 | tee "$out"
# The 1 GiB pull once: making and pushing it is the slow part.
MUR_BENCH_HEAVY=1 go test -run '^$' -bench 'BenchmarkPullPeakRSS' -benchtime 1x -timeout 30m ./cmd/mur/e2e 2>&1 | tee -a "$out"
go run ./cmd/benchreport < "$out" > BENCHMARKS.md
echo "wrote BENCHMARKS.md"
