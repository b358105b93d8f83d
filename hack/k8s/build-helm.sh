#!/usr/bin/env bash
# Builds helm from hack/helm/go.mod into the version-keyed Kubernetes bin cache (skipped when present).
set -euo pipefail
here="$(cd "$(dirname "$0")/../helm" && pwd)"
version="$(awk '/helm.sh\/helm\/v3/ {print $NF}' "$here/go.mod")"
cache="${WPBENCH_CACHE:-/var/cache/wpbench}"
bin="$cache/k8s/v1.37.2/bin"
export GOMODCACHE="${GOMODCACHE:-$cache/go/mod}" GOCACHE="${GOCACHE:-$cache/go/build}" CGO_ENABLED=0
export GOFLAGS="-buildvcs=false -mod=mod"
mkdir -p "$bin"
exec 9>"$bin/.build.lock"
flock 9  # one build at a time (a second caller waits, then finds the binaries)
if [[ -x "$bin/helm" ]]; then echo "helm present in $bin"; exit 0; fi
mkdir -p "$bin"
tmp="$(mktemp -d "$bin/.helm.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS
(cd "$here" && go build -trimpath -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$version" -o "$tmp/helm" helm.sh/helm/v3/cmd/helm)
mv "$tmp/helm" "$bin/helm"
echo "built helm $version in $((SECONDS - start)) s"
