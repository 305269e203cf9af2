#!/usr/bin/env bash
# make demo: the main job end to end on an embedded default, with nothing but Go on the machine.
# It packs a sample tool (a wasm guest built from testdata), signs it with a key it makes and
# pushes it to an OCI layout store in a temporary folder, pulls it into a fresh project whose home
# trusts that key and requires provenance, shows the lock and the pull record, runs it twice so
# that its state store persists, explains its grants, and verifies everything. Its happy path
# prints no warning.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mur="${MUR:-$root/bin/mur}"
work=$(mktemp -d "${TMPDIR:-/tmp}/mur-demo.XXXXXX")
if [ -n "${KEEP:-}" ]; then
  trap 'echo; echo "kept the demo folder: $work (project in $work/project, MURMUR_HOME=$work/home)"' EXIT
else
  trap 'rm -rf "$work"' EXIT
fi
export MURMUR_HOME="$work/home"
# Bold step titles on a terminal only, and never with NO_COLOR: piped output stays plain text.
if [ -t 1 ] && [ -z "${NO_COLOR:-}" ] && [ "${TERM:-}" != dumb ]; then
  step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
else
  step() { printf '\n== %s\n' "$*"; }
fi
run() { printf '$ %s\n' "$*"; "$@"; }

step "build the sample tool (GOOS=wasip1 GOARCH=wasm) and pack it"
mkdir -p "$work/notes"
(cd "$root" && GOOS=wasip1 GOARCH=wasm go build -trimpath -o "$work/notes/capsule.wasm" ./testdata/demo/notes)
cat > "$work/notes/murmur.yaml" <<'YAML'
name: notes
version: 1.0.0
runtime: tool
description: keeps notes in its durable state store
YAML
cd "$work"
run "$mur" pack notes -o notes-1.0.0.mur.zip

step "make a signing key; the home trusts it for scope demo and requires provenance there"
mkdir -p "$MURMUR_HOME"
printf '$ mur key generate demo --scope demo > %s\n' "$MURMUR_HOME/config.yaml"
"$mur" key generate demo --scope demo > "$MURMUR_HOME/config.yaml"
printf '    provenance: require\n' >> "$MURMUR_HOME/config.yaml"
run cat "$MURMUR_HOME/config.yaml"

step "push it, signed, to an OCI layout store"
run "$mur" push notes-1.0.0.mur.zip --scope demo --sign-key demo.key --store "oci-layout:$work/store"

step "a fresh project that declares it"
mkdir -p "$work/project/.murmur"
cd "$work/project"
cat > murmur.yaml <<'YAML'
name: demo-capsule
version: "1.0.0"
artifacts:
  - name: demo/notes
    version: "1.0.0"
capabilities:
  filesystem: { scope: "." }
  state: {}
  limits: { memory_mib: 128, timeout_s: 30 }
  install: { from: [stores] }
YAML
printf 'stores: [ "oci-layout:%s/store" ]\n' "$work" > .murmur/config.yaml
cat murmur.yaml

step "pull it: signature checked, CAS ingest, pull record, lock, tools/ and precompile"
run "$mur" pull
run cat murmur.lock
run ls tools/demo/notes
run "$mur" cache records

step "a locked pull again: everything is in the CAS, no store is asked"
run "$mur" pull

step "what a launch opens"
run "$mur" run --explain-scope notes

step "run it twice: state persists in \$MURMUR_HOME/state/demo-capsule/"
run "$mur" run notes -- add "pinned bytes are the bytes that run"
run "$mur" run notes -- add "state outlives the run"
run cat "$MURMUR_HOME/state/demo-capsule/notes.txt"
run cat workdir/receipt.txt

step "verify: the lock against the CAS, tools/, the compiled cache and the signature"
run "$mur" verify
echo
echo "demo complete: demo/notes was packed, signed, pushed, pulled with its signature verified and pinned in murmur.lock, run twice with its state kept, and verified offline"
