# mur: see README.md. Every target works on a fresh machine with Go 1.26; `make test` needs
# Debian's docker-registry (`.ci/run` installs it).
GO        ?= go
BIN       := bin/mur
FUZZTIME  ?= 10s
export GOFLAGS := -buildvcs=false

.PHONY: all build test unit bench fuzz lint demo ci-demo reliability clean check-registry

all: build

build:
	$(GO) build -o $(BIN) ./cmd/mur

# The whole suite with the race detector. It refuses to run without the real registry rather
# than skipping the integration tests.
test: check-registry lint
	$(GO) test -race -count=1 -timeout 30m ./...

check-registry:
	@command -v docker-registry >/dev/null 2>&1 || { \
	  echo "make test needs Debian's docker-registry for the registry integration suite:"; \
	  echo "  sudo apt-get update && sudo apt-get install -y docker-registry"; \
	  exit 1; }

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

bench: build
	./scripts/bench.sh

# A bounded run of every fuzz target.
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz' || true); do \
	    echo "fuzz $$pkg $$f ($(FUZZTIME))"; \
	    $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

demo: build
	./scripts/demo.sh

ci-demo: build
	./scripts/ci-demo.sh

reliability: build
	$(GO) test -count=1 -timeout 20m -run . ./internal/e2e/ -v -args -reliability-summary

clean:
	rm -rf bin
