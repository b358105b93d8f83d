#!/usr/bin/env bash
# Builds kwok and kwokctl (sigs.k8s.io/kwok, Go module) into a version-keyed cache; skipped when present.
# Prints the bin directory on stdout. The module has no replace directives, so `go install` takes it as is.
set -euo pipefail
version="${KWOK_VERSION:-v0.8.0}"
cache="${WPBENCH_CACHE:-/var/cache/wpbench}"
bin="$cache/kwok/$version/bin"
if [[ -x "$bin/kwok" && -x "$bin/kwokctl" ]]; then echo "$bin"; exit 0; fi
command -v go >/dev/null || { echo "build-kwok: needs Go >= 1.26 (the module says go 1.26.0)" >&2; exit 1; }
export GOMODCACHE="${GOMODCACHE:-$cache/go/mod}" GOCACHE="${GOCACHE:-$cache/go/build}" CGO_ENABLED=0
export GOFLAGS="-buildvcs=false"
mkdir -p "$bin"
tmp="$(mktemp -d "$bin/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS
GOBIN="$tmp" go install -trimpath -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${version#v}" \
  "sigs.k8s.io/kwok/cmd/kwok@$version" "sigs.k8s.io/kwok/cmd/kwokctl@$version" >&2
mv "$tmp/kwok" "$tmp/kwokctl" "$bin/"
echo "built kwok and kwokctl $version in $((SECONDS - start)) s" >&2
echo "$bin"
