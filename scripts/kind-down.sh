#!/usr/bin/env bash
# Remove what `make kind-up` made: the kind cluster (its node containers and, when empty, kind's network), its
# context in the default kubeconfig and its kubeconfig file, and our engine if kind-up started one (its namespace,
# veth pair and firewall rules). The engine's data root (images, the node image) is kept for a fast kind-up;
# PURGE=1 removes it too. Idempotent: what is missing is fine.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/kind-env.sh
source "$here/kind-env.sh"
engine=$(cat "$KIND_STATE/engine" 2>/dev/null || echo none)
if [[ $engine == private ]]; then
  if [[ -S $KIND_SOCKET ]]; then export DOCKER_HOST=$KIND_DOCKER_HOST; else engine=stopped; fi
fi
if [[ -x $KIND_BIN && $engine != stopped && $engine != none ]] && "$KIND_BIN" get clusters 2>/dev/null | grep -qx "$KIND_CLUSTER"; then
  "$KIND_BIN" delete cluster --name "$KIND_CLUSTER" --kubeconfig "$KIND_STATE/kubeconfig"
  # kind leaves its network behind; ours, if no other cluster uses it
  if [[ $engine == private ]] && [[ -z $(docker network inspect kind -f '{{range .Containers}}x{{end}}' 2>/dev/null) ]]; then
    docker network rm kind >/dev/null 2>&1 || true
  fi
else
  log "no cluster $KIND_CLUSTER"
fi
default_kc=${KUBECONFIG:-$HOME/.kube/config}
default_kc=${default_kc%%:*}
if [[ -f $default_kc ]]; then
  for what in context cluster user; do kubectl --kubeconfig "$default_kc" config "delete-$what" "kind-$KIND_CLUSTER" >/dev/null 2>&1 || true; done
fi
rm -f "$KIND_STATE/kubeconfig" "$KIND_STATE/controller-image" "$KIND_STATE/engine"
if [[ $engine == private || $engine == stopped ]]; then "$here/kind-engine.sh" "$([[ ${PURGE:-0} == 1 ]] && echo purge || echo stop)"; fi
if [[ ${PURGE:-0} == 1 ]]; then rm -rf "$KIND_STATE"; fi
log "kind-down done"
