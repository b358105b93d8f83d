#!/usr/bin/env bash
# Builds the kind node image for machines that cannot pull kind's (kindest/node) into the engine at $DOCKER_HOST:
#   hack/kind/build-node-image.sh TAG
# kind's own base cannot be used here: it is Debian trixie (systemd >= 256 refuses this host's cgroup v1), kindnetd's
# NetworkPolicy needs nfqueue (not in this kernel), its containerd sets restrict_oom_score_adj = false (needs
# CAP_SYS_RESOURCE), and `kind build node-image` pulls images. So the image is assembled from:
#   - Debian bookworm (debootstrap; systemd 252), the packages kind's base Dockerfile installs that bookworm has;
#   - kind's own node files from the sigs.k8s.io/kind module (entrypoint, systemd units, containerd config), with
#     restrict_oom_score_adj = true, the pause image pinned, and no Limit*/OOMScoreAdjust in the units (each needs
#     CAP_SYS_RESOURCE);
#   - our Kubernetes v1.37.2 binaries (hack/k8s/build.sh, with kubeadm and kube-proxy), containerd 2.1.9 and the CNI
#     plugins from Debian sid, bookworm's runc;
#   - the images kubeadm runs, imported into the node's containerd at build time: pause (pause.c, static),
#     kube-apiserver, kube-controller-manager, kube-scheduler (static binaries), and one tools image (bookworm with
#     iptables and ipset) that is kube-proxy, kube-router and etcd (sid's 3.5.30 behind hack/kind/node/etcd);
#   - kube-router as the node image's CNI (/kind/manifests/default-cni.yaml), a storage class without provisioner.
# The stock kind binary starts it with `kind create cluster --image TAG` and scripts/kind-config-local.yaml.
# Skipped when TAG exists with the same inputs (label wpbench.inputs).
set -euo pipefail
tag=${1:?usage: build-node-image.sh TAG}
[[ -n ${DOCKER_HOST:-} ]] || { echo "build-node-image: set DOCKER_HOST to the engine kind uses" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${WPBENCH_CACHE:-/var/cache/wpbench}
export GOMODCACHE=${GOMODCACHE:-$cache/go/mod}
bin=$cache/k8s/v1.37.2/bin
debs=$cache/k8s/debs/root
kind_src=$GOMODCACHE/sigs.k8s.io/kind@v0.33.0/images/base/files
etcd_version=3.5.30
log() { printf '%s node-image: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
# What kind's base Dockerfile installs, as far as bookworm has it (no fuse-overlayfs/nfs/iscsi: nothing here uses
# them), plus runc (kind builds its own) and ipset (kube-router's policy sets).
packages=systemd,systemd-sysv,conntrack,iptables,nftables,iproute2,ethtool,util-linux,mount,kmod,libseccomp2,pigz,e2fsprogs,bash,ca-certificates,curl,jq,procps,runc,ipset

"$repo/hack/k8s/build.sh" kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl kubeadm kube-proxy >&2
"$repo/hack/kube-router/build.sh" >&2
"$repo/hack/kind/build.sh" >&2 # crictl
"$repo/hack/k8s/fetch-debs.sh" >/dev/null
crictl=$cache/kind/v0.33.0/bin/crictl
kube_router=$(awk '$1 == "require" && $2 == "github.com/cloudnativelabs/kube-router/v2" {print $3}' "$repo/hack/kube-router/go.mod")
kube_router=$cache/kube-router/$kube_router/bin/kube-router
[[ -d $kind_src ]] || (cd "$repo/hack/k8s" && go mod download sigs.k8s.io/kind@v0.33.0)

inputs=$({
  echo "$packages"
  cat "$0" "$here"/node/* "$bin"/{kube-apiserver,kube-controller-manager,kube-scheduler,kubelet,kubectl,kubeadm,kube-proxy} \
    "$kube_router" "$crictl" "$debs/VERSIONS" | sha256sum
  find "$kind_src" -type f -print0 | sort -z | xargs -0 cat | sha256sum
} | sha256sum | cut -c1-16)
if [[ $(docker image inspect -f '{{index .Config.Labels "wpbench.inputs"}}' "$tag" 2>/dev/null) == "$inputs" ]]; then
  log "$tag is up to date ($inputs)"
  exit 0
fi
started=$SECONDS

# bookworm root filesystem, cached by its package list
rootfs=$cache/kind/bookworm-$(echo "$packages" | sha256sum | cut -c1-12)
if [[ ! -d $rootfs ]]; then
  command -v debootstrap >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
  . "$repo/scripts/lib/debian-mirror.sh"
  log "debootstrap bookworm into $rootfs"
  rm -rf "$rootfs.partial"
  debootstrap --variant=minbase --include="$packages" bookworm "$rootfs.partial" "$(debian_mirror)" >/dev/null
  rm -rf "$rootfs.partial"/var/cache/apt/archives/*.deb "$rootfs.partial"/var/lib/apt/lists/*
  mv "$rootfs.partial" "$rootfs"
fi

work=$(mktemp -d "$cache/kind/.node.XXXXXX")
cleanup() {
  [[ -f $work/containerd.pid ]] && kill "$(<"$work/containerd.pid")" 2>/dev/null && sleep 1
  umount -R "$work/node/var/lib/containerd" 2>/dev/null || true
  rm -rf "$work"
  for t in "${temp_tags[@]}"; do docker rmi -f "$t" >/dev/null 2>&1 || true; done
}
temp_tags=()
trap cleanup EXIT

import() { # dir tag env... : a docker image of the files in dir, its PATH set, plus ENV lines
  local dir=$1 ref=$2
  shift 2
  local changes=(--change "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
  for c; do changes+=(--change "$c"); done
  tar -C "$dir" -c . | docker import "${changes[@]}" - "$ref" >/dev/null
  temp_tags+=("$ref")
}

log "images for the node's containerd"
mkdir -p "$work/pause" "$work/tools"
gcc -Os -Wall -Werror -static -DVERSION=v3.10.2-wpbench -o "$work/pause/pause" \
  "$GOMODCACHE/k8s.io/kubernetes@v1.37.2/build/pause/linux/pause.c"
import "$work/pause" registry.k8s.io/pause:3.10.2 'ENTRYPOINT ["/pause"]' 'USER 65535:65535'
for c in kube-apiserver kube-controller-manager kube-scheduler; do
  mkdir -p "$work/$c/usr/local/bin"
  cp "$bin/$c" "$work/$c/usr/local/bin/"
  import "$work/$c" "registry.k8s.io/$c:v1.37.2" "ENTRYPOINT [\"/usr/local/bin/$c\"]"
done
cp -a "$rootfs/." "$work/tools/"
install -m 0755 "$bin/kube-proxy" "$kube_router" "$work/tools/usr/local/bin/"
install -D -m 0755 "$debs/usr/bin/etcd" "$work/tools/usr/local/lib/etcd/etcd"
install -m 0755 "$here/node/etcd" "$work/tools/usr/local/bin/"
import "$work/tools" wpbench.local/kind-tools:v1.37.2
docker tag wpbench.local/kind-tools:v1.37.2 registry.k8s.io/kube-proxy:v1.37.2
docker tag wpbench.local/kind-tools:v1.37.2 "wpbench.local/etcd:$etcd_version"
temp_tags+=(registry.k8s.io/kube-proxy:v1.37.2 "wpbench.local/etcd:$etcd_version")
rm -rf "$work/tools" "$work/kube-"*

log "node root filesystem"
node=$work/node
cp -a "$rootfs" "$node"
# kind's node files, as its base Dockerfile lays them out
install -m 0755 "$kind_src"/usr/local/bin/* "$node/usr/local/bin/"
mkdir -p "$node/kind/bin" "$node/kind/manifests" "$node/etc/containerd" "$node/etc/systemd/system/kubelet.service.d"
install -m 0644 "$kind_src"/kind/README.txt "$node/kind/"
install -m 0755 "$kind_src"/kind/bin/* "$node/kind/bin/"
install -m 0644 "$kind_src"/etc/crictl.yaml "$node/etc/"
install -m 0644 "$kind_src"/etc/default/kubelet "$node/etc/default/"
install -m 0644 "$kind_src"/etc/sysctl.d/* "$node/etc/sysctl.d/"
install -m 0644 "$kind_src"/etc/systemd/system/*.service "$kind_src"/etc/systemd/system/*.slice "$node/etc/systemd/system/"
install -m 0644 "$kind_src"/etc/systemd/system/kubelet.service.d/* "$node/etc/systemd/system/kubelet.service.d/"
# Each Limit*/OOMScoreAdjust line raises a limit or lowers an OOM score, which needs CAP_SYS_RESOURCE.
sed -i -E '/^(Limit[A-Z]+|OOMScoreAdjust)=/d' "$node"/etc/systemd/system/*.service
sed -e 's/restrict_oom_score_adj = false/restrict_oom_score_adj = true/' \
  -e 's#sandbox_image = .*#sandbox_image = "registry.k8s.io/pause:3.10.2"#' \
  -e '/^\[proxy_plugins/,/^$/d' -e '/^# fuse-overlayfs/d' \
  "$kind_src"/etc/containerd/config.toml >"$node/etc/containerd/config.toml"
grep -q 'restrict_oom_score_adj = true' "$node/etc/containerd/config.toml"
grep -q 'pause:3.10.2' "$node/etc/containerd/config.toml"
install -m 0755 "$debs"/usr/bin/{containerd,containerd-shim-runc-v2,ctr} "$crictl" "$node/usr/local/bin/"
# kind's cri-base.json: containerd's default spec with the product_uuid hook, without rlimits
"$debs/usr/bin/ctr" oci spec | python3 -c '
import json, sys
spec = json.load(sys.stdin)
spec.setdefault("hooks", {}).setdefault("createContainer", []).append({"path": "/kind/bin/mount-product-files.sh"})
spec["process"].pop("rlimits", None)
json.dump(spec, sys.stdout, indent=2)' >"$node/etc/containerd/cri-base.json"
mkdir -p "$node/opt/cni/bin"
cp -a "$debs"/usr/lib/cni/. "$node/opt/cni/bin/"
install -m 0755 "$bin"/{kubeadm,kubelet,kubectl} "$node/usr/bin/"
echo v1.37.2 >"$node/kind/version"
install -m 0644 "$here/node/default-cni.yaml" "$here/node/default-storage.yaml" "$node/kind/manifests/"
# the rest of kind's base Dockerfile
find "$node/lib/systemd/system/sysinit.target.wants/" -name systemd-tmpfiles-setup.service -delete
rm -f "$node"/lib/systemd/system/multi-user.target.wants/* "$node"/etc/systemd/system/*.wants/* \
  "$node"/lib/systemd/system/local-fs.target.wants/* "$node"/lib/systemd/system/sockets.target.wants/*udev* \
  "$node"/lib/systemd/system/sockets.target.wants/*initctl* "$node"/lib/systemd/system/basic.target.wants/*
echo "ReadKMsg=no" >>"$node/etc/systemd/journald.conf"
ln -sf /usr/lib/systemd/systemd "$node/sbin/init"
systemctl --root="$node" enable kubelet.service containerd.service undo-mount-hacks.service >/dev/null 2>&1
systemctl --root="$node" mask systemd-binfmt.service >/dev/null 2>&1
mkdir -p "$node/etc/kubernetes/manifests"

log "importing the images into the node's containerd"
mkdir -p "$node/var/lib/containerd" "$work/state"
cat >"$work/containerd.toml" <<EOF
version = 3
root = "$node/var/lib/containerd"
state = "$work/state"
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.cri.v1.images", "io.containerd.cri.v1.runtime", "io.containerd.nri.v1.nri"]
[grpc]
  address = "$work/containerd.sock"
[ttrpc]
  address = "$work/containerd.sock.ttrpc"
EOF
setsid "$debs/usr/bin/containerd" --config "$work/containerd.toml" >"$work/containerd.log" 2>&1 </dev/null &
echo $! >"$work/containerd.pid"
for _ in $(seq 100); do "$debs/usr/bin/ctr" -a "$work/containerd.sock" version >/dev/null 2>&1 && break; sleep 0.1; done
docker save registry.k8s.io/pause:3.10.2 registry.k8s.io/kube-apiserver:v1.37.2 \
  registry.k8s.io/kube-controller-manager:v1.37.2 registry.k8s.io/kube-scheduler:v1.37.2 \
  registry.k8s.io/kube-proxy:v1.37.2 wpbench.local/kind-tools:v1.37.2 "wpbench.local/etcd:$etcd_version" |
  "$debs/usr/bin/ctr" -a "$work/containerd.sock" -n k8s.io images import --snapshotter overlayfs - >/dev/null
"$debs/usr/bin/ctr" -a "$work/containerd.sock" -n k8s.io images ls -q >&2
kill "$(<"$work/containerd.pid")"
for _ in $(seq 50); do kill -0 "$(<"$work/containerd.pid")" 2>/dev/null || break; sleep 0.2; done
rm -f "$work/containerd.pid"

log "importing $tag"
previous=$(docker image inspect -f '{{.Id}}' "$tag" 2>/dev/null || true)
tar -C "$node" -c . | docker import --change "ENV container=docker" --change "STOPSIGNAL SIGRTMIN+3" \
  --change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' --change "LABEL wpbench.inputs=$inputs" - "$tag" >/dev/null
[[ -z $previous ]] || docker rmi "$previous" >/dev/null 2>&1 || true # the tag's previous build (kept if in use)
log "built $tag in $((SECONDS - started)) s"
