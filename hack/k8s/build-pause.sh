#!/usr/bin/env bash
# Builds the pod sandbox image (tag given as $1) from pause.c in the k8s.io/kubernetes module (static gcc)
# into Docker, unless that tag exists there.
set -euo pipefail
tag="$1"
here="$(cd "$(dirname "$0")" && pwd)"
docker image inspect "$tag" >/dev/null 2>&1 && exit 0
src="${GOMODCACHE:-${WPBENCH_CACHE:-/var/cache/wpbench}/go/mod}/k8s.io/kubernetes@v1.37.2/build/pause/linux/pause.c"
[[ -f "$src" ]] || { echo "build-pause: $src missing (run hack/k8s/build.sh first)" >&2; exit 1; }
ctx="$(mktemp -d)"
trap 'rm -rf "$ctx"' EXIT
gcc -Os -Wall -Werror -static -DVERSION=v3.10.2-wpbench -o "$ctx/pause" "$src"
cp "$here/pause/Dockerfile" "$ctx/"
docker build -q -t "$tag" "$ctx" >/dev/null
echo "built $tag"
