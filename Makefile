# mur: see README.md. Every target works on a fresh machine with Go 1.26; `make test` needs
# Debian's docker-registry (`.ci/run` installs it).
GO        ?= go
BIN       := bin/mur
FUZZTIME  ?= 10s
export GOFLAGS := -buildvcs=false

.PHONY: all build test test-under-load unit e2e-bins e2e-run bench fuzz lint cross demo ci-demo reliability clean check-registry trusted-roots

all: build

# -buildvcs=auto stamps the git revision into the binary (mur version) when built in a clone.
# mur-provenance, which verifies Sigstore bundles for mur, is installed beside it.
build:
	$(GO) build -buildvcs=auto -o $(BIN) ./cmd/mur
	$(GO) build -buildvcs=auto -o $(dir $(BIN))mur-provenance ./cmd/mur-provenance

# The whole suite: every package with the race detector, then the end-to-end suite on the real
# binary (which ends with the reliability table). It refuses to run without the real registry
# rather than skipping the integration tests. Each half prints how long it took, pass or fail.
# lint and the end-to-end binaries are built beside the unit half, whose packages leave a core
# idle now and then (between test binaries, while one waits on a timeout).
test: check-registry
	@$(MAKE) --no-print-directory -j3 lint unit e2e-bins
	@$(MAKE) --no-print-directory e2e-run

# timed NAME CMD: runs CMD and prints NAME's duration, keeping CMD's status.
timed = start=$$(date +%s); $(2); rc=$$?; echo "make test: $(1) took $$(( $$(date +%s) - start ))s"; exit $$rc

# The packages that take longest start first (go test runs them in the order given, two at a
# time): in their alphabetical place, sandbox, near the end, ran alone for the half's last minutes.
UNIT_FIRST := ./fetch/pull ./sandbox ./fetch

# The race detector sleeps a second as each test binary exits (atexit_sleep_ms), for goroutines
# still running to report a race: about 50 seconds of a 50-package run, half of it on the clock.
# Only a goroutine that a test leaked past its end could race then. A GORACE of your own wins.
unit:
	@$(call timed,the unit half (every package under -race),GORACE="atexit_sleep_ms=0 $$GORACE" $(GO) test -race -count=1 -timeout 30m $(UNIT_FIRST) $$($(GO) list ./... | grep -v /cmd/mur/e2e))

# make test while stress-ng keeps more workers busy than there are cores, as on the shared 2-core
# machine the README's numbers come from: a test that needs an idle machine fails here. Margins
# that must still be measured on the clock stretch by MUR_TEST_SLOWDOWN (internal/slowdown).
test-under-load:
	@command -v stress-ng >/dev/null 2>&1 || { echo "make test-under-load needs stress-ng: sudo apt-get install -y stress-ng"; exit 1; }
	@stress-ng --cpu 4 --timeout 2h --quiet & hog=$$!; trap 'kill $$hog 2>/dev/null; wait $$hog 2>/dev/null' EXIT; \
	  MUR_TEST_SLOWDOWN=$${MUR_TEST_SLOWDOWN:-4} $(MAKE) test

check-registry:
	@command -v docker-registry >/dev/null 2>&1 || { \
	  echo "make test needs Debian's docker-registry for the registry integration suite:"; \
	  echo "  sudo apt-get update && sudo apt-get install -y docker-registry"; \
	  exit 1; }
	@command -v oras >/dev/null 2>&1 && command -v crane >/dev/null 2>&1 || \
	  echo "note: oras or crane is not on PATH, so the interop scripts are skipped; .ci/run installs them with go install"

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# The other systems mur builds for (README: Install): cmd/... for each, and go vet of every package,
# tests included, which type-checks the code of that system without running it. linux/arm64 is
# the fleets' other machine (docs/fleets.md); it shares linux/amd64's code, but not its assembly
# and word size in the dependencies.
CROSS := linux/arm64 darwin/arm64 darwin/amd64 windows/amd64

cross:
	@set -e; for t in $(CROSS); do \
	  echo "cross: $$t"; \
	  GOOS=$${t%/*} GOARCH=$${t#*/} $(GO) build ./cmd/...; \
	  GOOS=$${t%/*} GOARCH=$${t#*/} $(GO) vet ./...; \
	done

bench: build
	./scripts/bench.sh

# Refresh the Sigstore trusted roots embedded in fetch/provenance/sigstore (needs the network and gh).
trusted-roots:
	./scripts/refresh-trusted-roots.sh

# A bounded run of every fuzz target.
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz' || true); do \
	    echo "fuzz $$pkg $$f ($(FUZZTIME))"; \
	    $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

# make demo KEEP=1 keeps the demo's folder (its project, store and home) and prints its path.
demo: build
	KEEP=$(KEEP) ./scripts/demo.sh

ci-demo: build
	./scripts/ci-demo.sh

# The end-to-end suite, run as a compiled test binary so that its summary table is printed. Its
# tests mostly wait (on mur starting, on registries, on killed pulls), so E2E_PARALLEL of them run
# at once, more than there are cores.
E2E_PARALLEL ?= 4

reliability: check-registry e2e-bins
	@$(MAKE) --no-print-directory e2e-run

# The end-to-end test binary, and the mur it runs (MUR_E2E_BIN: cmd/mur/e2e builds its own when
# that is unset, as under a plain go test).
E2E_BIN := bin/e2e

e2e-bins:
	@$(call timed,building the end-to-end binaries,$(GO) test -c -o bin/e2e.test ./cmd/mur/e2e && $(GO) build -o $(E2E_BIN)/ ./cmd/mur ./cmd/mur-provenance)

e2e-run: check-registry
	@$(call timed,the end-to-end half (cmd/mur/e2e on the real binary),cd cmd/mur/e2e && MUR_E2E_BIN=$(CURDIR)/$(E2E_BIN)/mur ../../../bin/e2e.test -test.count=1 -test.timeout 25m -test.parallel $(E2E_PARALLEL) -reliability-summary)

clean:
	rm -rf bin
