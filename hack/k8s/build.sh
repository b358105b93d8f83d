#!/usr/bin/env bash
# Builds the Kubernetes v1.37.2 server binaries and kubectl from hack/k8s/go.mod into a cache keyed by
# version (default /var/cache/wpbench/k8s/v1.37.2/bin). A binary already there is not rebuilt. Arguments name the
# components (default: the local cluster's); the kind node image (hack/kind/build-node-image.sh) adds kubeadm and
# kube-proxy. What is missing is built in one go build invocation.
# All are static (CGO_ENABLED=0), as upstream releases them.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
version="v1.37.2"
source "$(dirname "${BASH_SOURCE[0]}")/../lib/go-build.sh"
bin="$cache/k8s/$version/bin"
lock_bin_dir "$bin"
components=("$@")
((${#components[@]})) || components=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)
missing=()
for c in "${components[@]}"; do [[ -x "$bin/$c" ]] || missing+=("$c"); done
if ((${#missing[@]} == 0)); then echo "k8s $version binaries present in $bin"; exit 0; fi
minor="${version#v1.}"; minor="${minor%%.*}"
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
tmp="$(mktemp -d "$bin/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
pkgs=()
for c in "${missing[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
echo "building ${missing[*]} ($version) into $bin"
start=$SECONDS
(cd "$here" && go build -trimpath -ldflags "$ldflags" -o "$tmp/" "${pkgs[@]}")
for c in "${missing[@]}"; do mv "$tmp/$c" "$bin/$c"; done
echo "built ${missing[*]} in $((SECONDS - start)) s"
