#!/usr/bin/env bash
# Every binary the local cluster runs, built or fetched into the version-keyed cache (each step skips what is
# already there): Kubernetes v1.37.2, helm, kube-router, etcd/containerd/CNI from sid; then the PATHS file.
# The one list of them: `make k8s-binaries` and scripts/cluster-up.sh both run this script.
# Build logs go to stderr, so a caller's stdout stays its own.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
"$here/build.sh" >&2
"$here/build-helm.sh" >&2
"$here/../kube-router/build.sh" >&2
"$here/fetch-debs.sh" >/dev/null
"$here/write-paths.sh"
