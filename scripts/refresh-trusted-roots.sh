#!/bin/sh
# Refreshes the Sigstore trusted roots that mur embeds (fetch/provenance/sigstore/roots/). It needs the
# network and gh (https://cli.github.com), whose `gh attestation trusted-root` walks the TUF
# repositories of Sigstore's public-good instance and of GitHub's own instance and prints one
# trusted_root.json per line. mur itself never contacts TUF: run this, review the diff, rebuild.
set -eu
dir=$(dirname "$0")/../fetch/provenance/sigstore/roots
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gh attestation trusted-root >"$tmp/roots.jsonl"
# Each line is one instance; GitHub's is the one whose CA is fulcio.githubapp.com.
n=0
while IFS= read -r line; do
	[ -n "$line" ] || continue
	n=$((n + 1))
	printf '%s\n' "$line" >"$tmp/$n.json"
	if grep -q 'fulcio.githubapp.com' "$tmp/$n.json"; then
		python3 -m json.tool --indent 1 "$tmp/$n.json" >"$dir/github.json"
	else
		python3 -m json.tool --indent 2 "$tmp/$n.json" >"$dir/public-good.json"
	fi
done <"$tmp/roots.jsonl"
echo "refreshed $n trusted roots in $dir; run go test ./fetch/provenance/sigstore/ and review git diff"
