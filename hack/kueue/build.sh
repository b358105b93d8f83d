#!/usr/bin/env bash
# Builds Kueue's manager (sigs.k8s.io/kueue, Go module, cmd/kueue) into a version-keyed cache; skipped when present.
# Prints the bin directory on stdout. The module has no replace directives, so `go install` takes it as is; its
# CRDs and RBAC are read from the same module's config/ tree in the module cache (hack/kueue/install.sh).
set -euo pipefail
version="${KUEUE_VERSION:-v0.17.0}"
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=../lib/go-build.sh
. "$here/../lib/go-build.sh"
bin="$cache/kueue/$version/bin"
if [[ -x "$bin/kueue" ]]; then echo "$bin"; exit 0; fi
command -v go >/dev/null || { echo "build-kueue: needs Go >= 1.25 (the module says go 1.25.0)" >&2; exit 1; }
lock_bin_dir "$bin"
if [[ -x "$bin/kueue" ]]; then echo "$bin"; exit 0; fi
tmp="$(mktemp -d "$bin/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS
GOBIN="$tmp" go install -trimpath \
  -ldflags "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$version -X sigs.k8s.io/kueue/pkg/version.GitCommit=module" \
  "sigs.k8s.io/kueue/cmd/kueue@$version" >&2
mv "$tmp/kueue" "$bin/"
echo "built kueue $version in $((SECONDS - start)) s" >&2
echo "$bin"
