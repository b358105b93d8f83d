#!/usr/bin/env bash
# Stops the local Kubernetes started by cluster-up.sh: its pods, kubelet, containerd, control plane and
# network rules; removes context wpbench-local from the default kubeconfig. Keeps the state (etcd data,
# certificates, imported images) for a fast next start, unless PURGE=1. Idempotent.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/cluster-env.sh
source "$here/cluster-env.sh"
[[ $EUID -eq 0 ]] || die "needs root"

stop kube-router
stop kubelet
stop_pods
stop containerd
stop_pods
stop kube-scheduler
stop kube-controller-manager
stop kube-apiserver
stop etcd

drop_kube_router_rules() { # kube-router leaves its chains and ipsets behind when stopped (filter table only)
  local chain n chains
  for chain in INPUT FORWARD OUTPUT; do
    for n in $(iptables -L "$chain" -n --line-numbers | awk -v c="KUBE-ROUTER-$chain" '$2 == c {print $1}' | sort -rn); do
      iptables -D "$chain" "$n"
    done
  done
  chains=$(iptables -S | awk '$1 == "-N" && $2 ~ /^KUBE-(ROUTER|NWPLCY|POD-FW)-/ {print $2}')
  for chain in $chains; do iptables -F "$chain"; done
  for chain in $chains; do iptables -X "$chain"; done
  for n in $(ipset list -n 2>/dev/null | grep -E '^KUBE-(SRC|DST)-'); do ipset destroy "$n"; done
}
drop_kube_router_rules

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
