#!/usr/bin/env bash
# make bench: every benchmark beside its peer in one run, written to BENCHMARKS.md as ratios.
# crane is installed with `go install` at bench time (never vendored). BenchmarkRunMemory runs a
# guest that grows to 1 GiB under mur and under a bare wazero program, whose default memory peaks
# near 4 GiB of RSS: leave that much memory free.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
go test -run '^$' -bench . -benchtime 5x -timeout 60m ./cas ./lock ./sandbox ./cmd/mur/e2e 2>&1 | tee "$out"
go run ./cmd/benchreport < "$out" > BENCHMARKS.md
echo "wrote BENCHMARKS.md"
