#!/usr/bin/env bash
# Builds the stock kind CLI (sigs.k8s.io/kind, its Go module as published, no changes) into a version-keyed cache
# (default /var/cache/wpbench/kind/v0.33.0/bin); skipped when present. The module has no replace directives, so
# `go install` takes it as is.
set -euo pipefail
version="${KIND_VERSION:-v0.33.0}"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/go-build.sh"
bin="$cache/kind/$version/bin"
lock_bin_dir "$bin"
if [[ -x "$bin/kind" ]]; then echo "kind $version present in $bin"; exit 0; fi
tmp="$(mktemp -d "$bin/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS
GOBIN="$tmp" GOFLAGS=-buildvcs=false go install -trimpath -ldflags "-buildid= -s -w" "sigs.k8s.io/kind@$version"
mv "$tmp/kind" "$bin/kind"
echo "built kind $version in $((SECONDS - start)) s"
