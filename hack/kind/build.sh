#!/usr/bin/env bash
# Builds the stock kind CLI (sigs.k8s.io/kind, its Go module as published, no changes) into a version-keyed cache
# (default /var/cache/wpbench/kind/v0.33.0/bin), and crictl (sigs.k8s.io/cri-tools) for the node image we build
# (`kind load` asks each node's crictl whether it has an image already); each skipped when present. Neither module
# has replace directives, so `go install` takes them as they are.
set -euo pipefail
version="${KIND_VERSION:-v0.33.0}"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/go-build.sh"
bin="$cache/kind/$version/bin"
lock_bin_dir "$bin"
crictl_version=v1.37.0
if [[ -x "$bin/kind" && -x "$bin/crictl" ]]; then echo "kind $version and crictl $crictl_version present in $bin"; exit 0; fi
tmp="$(mktemp -d "$bin/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS
if [[ ! -x "$bin/kind" ]]; then
  GOBIN="$tmp" go install -trimpath -ldflags "-buildid= -s -w" "sigs.k8s.io/kind@$version"
  mv "$tmp/kind" "$bin/kind"
fi
if [[ ! -x "$bin/crictl" ]]; then
  GOBIN="$tmp" go install -trimpath -ldflags "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$crictl_version" \
    "sigs.k8s.io/cri-tools/cmd/crictl@$crictl_version"
  mv "$tmp/crictl" "$bin/crictl"
fi
echo "built kind $version / crictl $crictl_version in $((SECONDS - start)) s"
