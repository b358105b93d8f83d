#!/usr/bin/env bash
# Builds helm from hack/helm/go.mod into the version-keyed Kubernetes bin cache (skipped when present).
set -euo pipefail
here="$(cd "$(dirname "$0")/../helm" && pwd)"
version="$(awk '/helm.sh\/helm\/v3/ {print $NF}' "$here/go.mod")"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/go-build.sh"
bin="$cache/k8s/v1.37.2/bin"
lock_bin_dir "$bin"
if [[ -x "$bin/helm" ]]; then echo "helm present in $bin"; exit 0; fi
tmp="$(mktemp -d "$bin/.helm.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS
(cd "$here" && go build -trimpath -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$version" -o "$tmp/helm" helm.sh/helm/v3/cmd/helm)
mv "$tmp/helm" "$bin/helm"
echo "built helm $version in $((SECONDS - start)) s"
