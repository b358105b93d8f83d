#!/usr/bin/env bash
# Builds kube-router, the local cluster's NetworkPolicy enforcer, from hack/kube-router/go.mod into a cache keyed
# by version (default /var/cache/wpbench/kube-router/VERSION/bin). A binary already there is not rebuilt.
# Static (CGO_ENABLED=0), as upstream's Makefile builds it; version ldflags as upstream sets them.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
module="github.com/cloudnativelabs/kube-router/v2"
version="$(awk -v m="$module" '$1 == "require" && $2 == m {print $3}' "$here/go.mod")"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/go-build.sh"
bin="$cache/kube-router/$version/bin"
lock_bin_dir "$bin"
if [[ -x "$bin/kube-router" ]]; then echo "kube-router $version present in $bin"; exit 0; fi
tmp="$(mktemp -d "$bin/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
echo "building kube-router $version into $bin"
start=$SECONDS
(cd "$here" && go build -trimpath -o "$tmp/kube-router" \
  -ldflags "-s -w -X $module/pkg/version.Version=$version -X $module/pkg/version.BuildDate=1970-01-01T00:00:00Z" \
  "$module/cmd/kube-router")
mv "$tmp/kube-router" "$bin/kube-router"
echo "built kube-router $version in $((SECONDS - start)) s"
