#!/usr/bin/env bash
# Puts this machine back to the state a fresh CI machine starts in, to measure a cold `.ci/run` (issue 23):
# stops and purges the local cluster, stops the Docker engine, purges what `make test` apt-installs (docker.io,
# debootstrap, chromium, chromium-driver, ipset) and removes every cache it fills (/var/cache/wpbench, engine,
# kubelet and containerd data, pip, npm and Go caches). Destructive: runs only with --yes, as root.
set -uo pipefail
[[ ${1:-} == --yes && $(id -u) == 0 ]] || { echo "usage (as root): $0 --yes   # wipes caches, images and packages" >&2; exit 2; }
repo="$(cd "$(dirname "$0")/../.." && pwd)"
PURGE=1 "$repo/scripts/cluster-down.sh" || true
docker ps -aq 2>/dev/null | xargs -r docker rm -f >/dev/null 2>&1 || true
pkill dockerd; pkill -f containerd; sleep 5; pkill -9 dockerd; pkill -9 -f containerd; sleep 2
mount | awk '$3 ~ /^\/var\/lib\/(docker|kubelet|containerd)/ || /wpbench/ {print $3}' | sort -r | xargs -r -n1 umount -l
DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq docker.io debootstrap chromium chromium-driver ipset containerd runc >/dev/null
DEBIAN_FRONTEND=noninteractive apt-get autoremove --purge -y -qq >/dev/null
apt-get clean
rm -rf /var/lib/docker /var/lib/containerd /var/lib/kubelet "${WPBENCH_CACHE:-/var/cache/wpbench}" \
  /root/.cache/pip /root/.npm /root/.cache/go-build /root/go /run/docker* /var/run/docker.sock
for link in kube-bridge docker0 kube-dummy-if; do ip link del "$link" 2>/dev/null; done
echo "wiped: the next CI=true bash .ci/run starts cold"
