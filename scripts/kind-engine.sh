#!/usr/bin/env bash
# The Docker engine kind runs on here: dockerd v28.5.2 (hack/dockerd/build.sh) beside the machine's own engine,
# with its own socket, data root, exec root, pidfile and bridge, inside a network namespace of its own.
#   scripts/kind-engine.sh start    start it unless it answers; prints DOCKER_HOST=...
#   scripts/kind-engine.sh stop     stop it, remove its namespace, link and firewall rules (data root kept)
#   scripts/kind-engine.sh purge    stop, then remove its data root too
# Why a second engine: kind runs every node `--privileged` as root. The machine's Docker 20.10 asks the kernel for
# every capability it knows and fails ("unable to apply caps") because this machine's bounding set lacks
# CAP_SYS_RESOURCE; Docker >= 23 grants a privileged container the bounding set instead.
# Why a network namespace: dockerd rewrites iptables (its DOCKER* chains, NAT, the FORWARD policy) and names its
# bridges docker0/br-*, which the machine's engine owns in the host namespace. In a namespace of its own it can
# touch nothing of the host's; a veth pair (host $KIND_HOST_ADDR, namespace $KIND_API_ADDR) is the only way in,
# the namespace has no default route and the host forwards nothing from it, so no packet leaves this machine.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
# shellcheck source=scripts/kind-env.sh
source "$here/kind-env.sh"

running() { [[ -f $KIND_RUN/dockerd.pid ]] && kill -0 "$(<"$KIND_RUN/dockerd.pid")" 2>/dev/null; }
answering() { DOCKER_HOST=$KIND_DOCKER_HOST docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

ensure_rule() { # chain rule... : in the host's filter table, at the top unless present
  local chain=$1
  shift
  iptables -C "$chain" "$@" 2>/dev/null || iptables -I "$chain" 1 "$@"
}

netns_up() {
  [[ -e /run/netns/$KIND_NETNS ]] || ip netns add "$KIND_NETNS"
  ip -n "$KIND_NETNS" link set lo up
  if ! ip link show "$KIND_VETH" >/dev/null 2>&1; then
    ip link add "$KIND_VETH" type veth peer name "$KIND_VETH_NS" netns "$KIND_NETNS"
    ip addr add "$KIND_HOST_ADDR/30" dev "$KIND_VETH"
    ip -n "$KIND_NETNS" addr add "$KIND_API_ADDR/30" dev "$KIND_VETH_NS"
  fi
  ip link set "$KIND_VETH" up
  ip -n "$KIND_NETNS" link set "$KIND_VETH_NS" up
  # the host talks to the namespace (the API server port); it routes nothing through it
  ensure_rule FORWARD -i "$KIND_VETH" -j DROP
  ensure_rule FORWARD -o "$KIND_VETH" -j DROP
}

start() {
  if running && answering; then echo "DOCKER_HOST=$KIND_DOCKER_HOST"; return; fi
  "$repo/hack/dockerd/build.sh" >&2
  "$repo/hack/k8s/fetch-debs.sh" >/dev/null # containerd 2.1.9 for dockerd to manage
  command -v runc >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq runc >/dev/null; }
  netns_up
  mkdir -p "$KIND_RUN" "$KIND_STATE/docker"
  log "starting dockerd $DOCKERD_VERSION (socket $KIND_SOCKET, namespace $KIND_NETNS)"
  # The process enters the namespace's network only (not a new mount namespace: cgroups and /var stay the host's).
  PATH="$DOCKERD_BIN:$DEBS/usr/bin:$PATH" setsid nsenter --net="/run/netns/$KIND_NETNS" -- \
    "$DOCKERD_BIN/dockerd" --data-root "$KIND_STATE/docker" --exec-root "$KIND_RUN/exec" \
    --pidfile "$KIND_RUN/dockerd.pid" -H "$KIND_DOCKER_HOST" --bip "$KIND_BIP" \
    --default-address-pool "base=$KIND_POOL,size=24" --ip-masq=false --cgroup-parent wpbench-kind \
    --exec-opt native.cgroupdriver=cgroupfs --userland-proxy-path "$DOCKERD_BIN/docker-proxy" \
    --shutdown-timeout 15 >>"$KIND_RUN/dockerd.log" 2>&1 </dev/null &
  local deadline=$((SECONDS + 60))
  until answering; do
    ((SECONDS < deadline)) || die "dockerd did not answer within 60 s (log: $KIND_RUN/dockerd.log)"
    sleep 0.3
  done
  echo "DOCKER_HOST=$KIND_DOCKER_HOST"
}

stop() {
  if running; then
    local pid
    pid=$(<"$KIND_RUN/dockerd.pid")
    log "stopping dockerd (pid $pid)"
    kill "$pid"
    for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  iptables -D FORWARD -i "$KIND_VETH" -j DROP 2>/dev/null || true
  iptables -D FORWARD -o "$KIND_VETH" -j DROP 2>/dev/null || true
  # the cgroup parent its containers ran under (empty once they are gone)
  find /sys/fs/cgroup/*/wpbench-kind -depth -type d -exec rmdir {} + 2>/dev/null || true
  ip link del "$KIND_VETH" 2>/dev/null || true
  [[ -e /run/netns/$KIND_NETNS ]] && ip netns delete "$KIND_NETNS"
  rm -rf "$KIND_RUN"
}

case ${1:-} in
  start) start ;;
  stop) stop ;;
  purge) stop && rm -rf "$KIND_STATE" ;;
  *) sed -n '2,6p' "$0" >&2 && exit 2 ;;
esac
