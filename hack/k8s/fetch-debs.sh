#!/usr/bin/env bash
# Unpacks etcd, containerd and the CNI plugins from Debian sid into a cache keyed by package version,
# without touching the host's apt sources: a private apt configuration (own lists, cache, sources list)
# downloads the .debs and dpkg-deb -x unpacks them. The mirror is read from the host's own apt sources.
# Prints name=path lines for the binaries it provides.
set -euo pipefail
cache="${WPBENCH_CACHE:-/var/cache/wpbench}/k8s/debs"
packages=(etcd-server containerd containernetworking-plugins)
mkdir -p "$cache"

. "$(dirname "$0")/../../scripts/lib/debian-mirror.sh"

present() { [[ -x "$cache/root/usr/bin/etcd" && -x "$cache/root/usr/bin/containerd" && -x "$cache/root/usr/lib/cni/bridge" ]]; }

if ! present; then
  apt_dir="$cache/apt"
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/archives/partial" "$apt_dir/debs"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $(debian_mirror) sid main" > "$apt_dir/sources.list"
  cat > "$apt_dir/apt.conf" <<CONF
Dir::Etc::SourceList "$apt_dir/sources.list";
Dir::Etc::SourceParts "/nonexistent";
Dir::State::Lists "$apt_dir/lists";
Dir::Cache "$apt_dir";
Dir::Cache::archives "$apt_dir/archives";
Acquire::Check-Valid-Until "false";
APT::Get::List-Cleanup "false";
CONF
  export APT_CONFIG="$apt_dir/apt.conf"
  apt-get -qq update
  rm -f "$apt_dir"/debs/*.deb
  (cd "$apt_dir/debs" && apt-get -qq download "${packages[@]}")
  rm -rf "$cache/root.partial" && mkdir -p "$cache/root.partial"
  for deb in "$apt_dir"/debs/*.deb; do dpkg-deb -x "$deb" "$cache/root.partial"; done
  (cd "$apt_dir/debs" && ls *.deb) > "$cache/root.partial/VERSIONS"
  rm -rf "$cache/root" && mv "$cache/root.partial" "$cache/root"
fi
r="$cache/root"
echo "etcd=$r/usr/bin/etcd"
echo "etcdctl=$r/usr/bin/etcdctl"
echo "containerd=$r/usr/bin/containerd"
echo "containerd-shim-runc-v2=$r/usr/bin/containerd-shim-runc-v2"
echo "ctr=$r/usr/bin/ctr"
echo "cni=$r/usr/lib/cni"
