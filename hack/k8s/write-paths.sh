#!/usr/bin/env bash
# Writes $WPBENCH_CACHE/k8s/PATHS: one name=path line for each cached Kubernetes binary that exists,
# so other tools (kwok, benchmarks) find the same binaries.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${WPBENCH_CACHE:-/var/cache/wpbench}"
bin="$cache/k8s/v1.37.2/bin"
{
  "$here/fetch-debs.sh"
  for c in kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl helm; do
    if [[ -x "$bin/$c" ]]; then echo "$c=$bin/$c"; fi
  done
} >"$cache/k8s/PATHS.new"
mv "$cache/k8s/PATHS.new" "$cache/k8s/PATHS"
