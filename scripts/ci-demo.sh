#!/usr/bin/env bash
# make ci-demo: the README's CI recipe played locally. The first half warms a cache with the
# network (a real docker-registry on loopback when it is installed, else an OCI layout folder),
# the second half restores the cache, switches every store off and runs offline. Each step is a
# line of docs/ci.md's recipe: warm --locked, verify --frozen, run --frozen. MUR=PATH runs
# another mur than bin/mur.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mur="${MUR:-$root/bin/mur}"
work=$(mktemp -d "${TMPDIR:-/tmp}/mur-ci-demo.XXXXXX")
regpid=""
cleanup() { [ -n "$regpid" ] && kill "$regpid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
if [ -t 1 ] && [ -z "${NO_COLOR:-}" ] && [ "${TERM:-}" != dumb ]; then
  step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
else
  step() { printf '\n== %s\n' "$*"; }
fi
run() { printf '$ %s\n' "$*"; "$@"; }

step "publish a sample tool"
mkdir -p "$work/notes" "$work/project/.murmur"
(cd "$root" && GOOS=wasip1 GOARCH=wasm go build -trimpath -o "$work/notes/capsule.wasm" ./testdata/demo/notes)
printf 'name: notes\nversion: 1.0.0\nruntime: tool\n' > "$work/notes/murmur.yaml"
"$mur" pack "$work/notes" -o "$work/notes-1.0.0.mur.zip" >/dev/null
if command -v docker-registry >/dev/null 2>&1; then
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  cat > "$work/registry.yml" <<YAML
version: 0.1
log: { level: error }
storage: { filesystem: { rootdirectory: $work/registry } }
http: { addr: 127.0.0.1:$port }
YAML
  docker-registry serve "$work/registry.yml" >"$work/registry.log" 2>&1 &
  regpid=$!
  for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
  store="oci://127.0.0.1:$port/murmur"
else
  store="oci-layout:$work/layout"
fi
run "$mur" -q push "$work/notes-1.0.0.mur.zip" --scope demo --store "$store"
cd "$work/project"
cat > murmur.yaml <<'YAML'
name: ci-capsule
version: "1.0.0"
artifacts:
  - { name: demo/notes, version: "1.0.0" }
capabilities:
  state: {}
  install: { from: [stores] }
YAML
printf 'stores: [ "%s" ]\n' "$store" > .murmur/config.yaml
export MURMUR_HOME="$work/ci-cache/murmur-home"
"$mur" -q pull >/dev/null   # the developer's pull that produced the committed murmur.lock
rm -rf "$MURMUR_HOME" tools

step "CI job 1 (cache miss, network on): key = sha256(murmur.lock) = $(sha256sum murmur.lock | cut -c1-16)…"
run "$mur" warm --locked
run "$mur" warm --locked   # idempotent: one summary line, no request
tar -C "$work/ci-cache" -cf "$work/cache.tar" murmur-home

step "CI job 2 (cache hit): every store switched off"
if [ -n "$regpid" ]; then kill "$regpid"; wait "$regpid" 2>/dev/null || true; regpid=""; else mv "$work/layout" "$work/layout.off"; fi
rm -rf "$work/ci-cache" tools
mkdir -p "$work/ci-cache" && tar -C "$work/ci-cache" -xf "$work/cache.tar"
run "$mur" warm --locked   # a cache hit: no request, so no store is needed
run "$mur" verify --frozen
run "$mur" run --frozen notes -- add "ran offline in CI"
echo
echo "ci-demo complete: warmed with network, ran offline with every store down"
