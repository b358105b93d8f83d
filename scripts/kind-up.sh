#!/usr/bin/env bash
# Create (or reuse) the kind cluster $KIND_CLUSTER (one control plane, two workers), load the grader and controller
# images with `kind load`, install the chart with helm. Idempotent. Builds the stock kind v0.33.0 from its Go module.
# Where the machine's Docker can run kind's nodes (Docker >= 23, or a full capability bounding set) kind uses it;
# otherwise a second engine of our own (scripts/kind-engine.sh). Where kind's published node image can be pulled,
# it is used with scripts/kind-config.yaml; otherwise the node image is built here (hack/kind/build-node-image.sh)
# and started with scripts/kind-config-local.yaml. KIND_NODE=published|local forces one.
# The cluster's kubeconfig is written to $KIND_STATE/kubeconfig (context kind-$KIND_CLUSTER), and the context is
# added to the default kubeconfig without changing its current context.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
# shellcheck source=scripts/kind-env.sh
source "$here/kind-env.sh"
GRADER_IMAGE=${GRADER_IMAGE:-wpbench-grader:dev}
CONTROLLER_IMAGE=${CONTROLLER_IMAGE:-wpbench-controller:dev}
RELEASE=wpbench
RELEASE_NS=${RELEASE_NS:-wpbench-system}
RUN_NS=${RUN_NS:-wpbench}
NODE_IMAGE_LOCAL=wpbench.local/kind-node:$K8S_VERSION
started=$SECONDS
kubeconfig=$KIND_STATE/kubeconfig
mkdir -p "$KIND_STATE"

for image in "$GRADER_IMAGE" "$CONTROLLER_IMAGE"; do
  docker image inspect "$image" >/dev/null 2>&1 || die "image $image missing (make runtime-image controller-image)"
done
"$repo/hack/kind/build.sh" >&2
"$repo/hack/k8s/build.sh" >&2 # kubectl
"$repo/hack/k8s/build-helm.sh" >&2
kind() { "$KIND_BIN" "$@"; }

# The engine: this machine's, if it can start a root --privileged container; else our own.
engine_ok() {
  local major bnd last
  major=$(docker version -f '{{.Server.Version}}' 2>/dev/null | cut -d. -f1)
  [[ ${major:-0} -ge 23 ]] && return 0
  bnd=$((16#$(awk '/^CapBnd/ {print $2}' /proc/self/status)))
  last=$(</proc/sys/kernel/cap_last_cap)
  ((bnd == (1 << (last + 1)) - 1))
}
system_docker_host=${DOCKER_HOST:-}
if [[ ${KIND_ENGINE:-auto} == private ]] || { [[ ${KIND_ENGINE:-auto} == auto ]] && ! engine_ok; }; then
  "$here/kind-engine.sh" start >/dev/null
  export DOCKER_HOST=$KIND_DOCKER_HOST
  echo private >"$KIND_STATE/engine"
else
  echo system >"$KIND_STATE/engine"
fi
sdocker() { DOCKER_HOST=$system_docker_host docker "$@"; }

# The node image: kind's published one where it can be pulled, else ours.
published=$(sed -n 's/^const Image = "\(.*\)"/\1/p' \
  "${GOMODCACHE:-$CACHE/go/mod}/sigs.k8s.io/kind@$KIND_VERSION/pkg/apis/config/defaults/image.go")
[[ -n $published ]] || die "kind $KIND_VERSION's default node image not found in its module"
mode=${KIND_NODE:-auto}
if [[ $mode == auto ]]; then
  if docker image inspect "$published" >/dev/null 2>&1 || timeout 120 docker pull -q "$published" >/dev/null 2>&1; then
    mode=published
  else
    mode=local
  fi
fi
if [[ $mode == local ]]; then
  "$repo/hack/kind/build-node-image.sh" "$NODE_IMAGE_LOCAL"
  create=(--image "$NODE_IMAGE_LOCAL" --config "$here/kind-config-local.yaml")
else
  create=(--config "$here/kind-config.yaml")
fi

if ! kind get clusters 2>/dev/null | grep -qx "$KIND_CLUSTER"; then
  log "creating cluster $KIND_CLUSTER ($mode node image)"
  kind create cluster --name "$KIND_CLUSTER" "${create[@]}" --kubeconfig "$kubeconfig" --wait 180s
else
  kind get kubeconfig --name "$KIND_CLUSTER" >"$kubeconfig.new" && mv "$kubeconfig.new" "$kubeconfig"
  for node in $(kind get nodes --name "$KIND_CLUSTER"); do # a stopped node (a test stops one) is started again
    [[ $(docker inspect -f '{{.State.Running}}' "$node") == true ]] || { log "starting node $node"; docker start "$node" >/dev/null; }
  done
fi
chmod 600 "$kubeconfig"
k() { kubectl --kubeconfig "$kubeconfig" "$@"; }
k wait --for=condition=Ready nodes --all --timeout=180s >/dev/null

# the context in the default kubeconfig too (its current context unchanged)
default_kc=${KUBECONFIG:-$HOME/.kube/config}
default_kc=${default_kc%%:*}
mkdir -p "$(dirname "$default_kc")"
touch "$default_kc"
for what in context cluster user; do kubectl --kubeconfig "$default_kc" config "delete-$what" "kind-$KIND_CLUSTER" >/dev/null 2>&1 || true; done
KUBECONFIG="$default_kc:$kubeconfig" kubectl config view --flatten >"$default_kc.new"
chmod 600 "$default_kc.new" && mv "$default_kc.new" "$default_kc"

# Images: into the engine kind uses (when that is ours), then `kind load` into every node (kind skips a node
# that has the image's id already).
for image in "$GRADER_IMAGE" "$CONTROLLER_IMAGE"; do
  want=$(sdocker image inspect -f '{{.Id}}' "$image")
  if [[ $(docker image inspect -f '{{.Id}}' "$image" 2>/dev/null) != "$want" ]]; then
    log "copying $image into the kind engine"
    sdocker save "$image" | docker load -q >/dev/null
  fi
done
controller_id=$(docker image inspect -f '{{.Id}}' "$CONTROLLER_IMAGE")
kind load docker-image "$GRADER_IMAGE" "$CONTROLLER_IMAGE" --name "$KIND_CLUSTER" >&2

repo_part=${CONTROLLER_IMAGE%:*}
tag=${CONTROLLER_IMAGE##*:}
helm upgrade --install "$RELEASE" "$repo/charts/wpbench-k8s" --kubeconfig "$kubeconfig" \
  --namespace "$RELEASE_NS" --create-namespace \
  --set image.repository="$repo_part" --set image.tag="$tag" --set image.pullPolicy=IfNotPresent \
  --set "namespaces.runs={$RUN_NS}" --wait --timeout 5m >/dev/null
# A controller image rebuilt under the same tag: restart so the pod runs the loaded one.
stamp=$KIND_STATE/controller-image
if [[ -f $stamp && $(<"$stamp") != "$controller_id" ]]; then
  k -n "$RELEASE_NS" rollout restart "deployment/$RELEASE-wpbench-k8s-controller" >/dev/null
fi
echo "$controller_id" >"$stamp"
k -n "$RELEASE_NS" rollout status "deployment/$RELEASE-wpbench-k8s-controller" --timeout=180s >/dev/null
log "ready in $((SECONDS - started)) s: context kind-$KIND_CLUSTER ($kubeconfig), $(k get nodes --no-headers | wc -l) nodes, $mode node image, $(<"$KIND_STATE/engine") engine; runs go to namespace $RUN_NS"
