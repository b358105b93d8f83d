#!/usr/bin/env bash
# Stops the local Kubernetes started by cluster-up.sh: its pods, kubelet, containerd, control plane and
# network rules; removes context wpbench-local from the default kubeconfig. Keeps the state (etcd data,
# certificates, imported images) for a fast next start, unless PURGE=1. Idempotent.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/cluster-env.sh
source "$here/cluster-env.sh"
[[ $EUID -eq 0 ]] || die "needs root"

stop() {
  local pid
  pid=$(pid_of "$1") || { rm -f "$RUN/$1.pid"; return 0; }
  log "stopping $1"
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$RUN/$1.pid"
}

stop kube-router
stop kubelet
stop_pods
stop containerd
stop_pods
stop kube-scheduler
stop kube-controller-manager
stop kube-apiserver
stop etcd

del_rule() { local table=$1 chain=$2; shift 2; while iptables -t "$table" -D "$chain" "$@" 2>/dev/null; do :; done; }
del_rule filter FORWARD -i "$BRIDGE" -o "$BRIDGE" -j ACCEPT
del_rule filter FORWARD -i "$BRIDGE" ! -o "$BRIDGE" -j DROP
del_rule filter FORWARD ! -i "$BRIDGE" -o "$BRIDGE" -j DROP
del_rule nat PREROUTING -s "$POD_CIDR" -d "$KUBERNETES_SERVICE_IP/32" -p tcp --dport 443 -j DNAT --to-destination "$GATEWAY:$API_PORT"
ip route del blackhole "$SERVICE_CIDR" 2>/dev/null || true
ip link del "$BRIDGE" 2>/dev/null || true

if command -v kubectl >/dev/null; then
  kubectl config delete-context "$CONTEXT" >/dev/null 2>&1 || true
  kubectl config delete-cluster "$CONTEXT" >/dev/null 2>&1 || true
  kubectl config delete-user "$CONTEXT-admin" >/dev/null 2>&1 || true
fi
if [[ ${PURGE:-0} == 1 ]]; then
  log "removing $STATE"
  rm -rf "$STATE" "$RUN"
fi
log "down"
