#!/usr/bin/env bash
# Builds dockerd and docker-proxy v28.5.2 from hack/dockerd/go.mod into a cache keyed by version (default
# /var/cache/wpbench/dockerd/v28.5.2/bin); skipped when present. A second engine for kind only (scripts/kind-engine.sh):
# Docker >= 23 grants a --privileged container the capabilities of the bounding set, where this machine's 20.10 asks
# for every capability it knows and fails. Static (CGO_ENABLED=0); version ldflags as upstream's hack/make sets them.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
module="github.com/docker/docker"
version="$(awk -v m="$module" '$1 == "require" && $2 == m {print $3}' "$here/go.mod")"
version="${version%+incompatible}"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/go-build.sh"
bin="$cache/dockerd/$version/bin"
lock_bin_dir "$bin"
if [[ -x "$bin/dockerd" && -x "$bin/docker-proxy" ]]; then echo "dockerd $version present in $bin"; exit 0; fi
tmp="$(mktemp -d "$bin/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
echo "building dockerd and docker-proxy $version into $bin"
start=$SECONDS
v="$module/dockerversion"
(cd "$here" && go build -trimpath -tags "netgo osusergo exclude_graphdriver_btrfs" -o "$tmp/" \
  -ldflags "-s -w -X $v.Version=${version#v} -X $v.GitCommit=v28.5.2 -X $v.BuildTime=1970-01-01T00:00:00Z -X $v.PlatformName=wpbench" \
  "$module/cmd/dockerd" "$module/cmd/docker-proxy")
mv "$tmp/dockerd" "$tmp/docker-proxy" "$bin/"
echo "built dockerd and docker-proxy $version in $((SECONDS - start)) s"
