#!/usr/bin/env bash
# make bench: every benchmark beside its peer in one run, written to BENCHMARKS.md as ratios.
# crane is installed with `go install` at bench time (never vendored).
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
go test -run '^$' -bench . -benchtime 5x -timeout 60m ./cas ./lock ./sandbox ./cmd/mur/e2e 2>&1 | tee "$out"
go run ./cmd/benchreport < "$out" > BENCHMARKS.md
echo "wrote BENCHMARKS.md"
