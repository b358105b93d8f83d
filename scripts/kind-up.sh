#!/usr/bin/env bash
# Create (or reuse) a kind cluster, load the grader and controller images, install the chart.
# Needs: docker, kind >= 0.24, kubectl, helm (v3 or v4). Images are built by `make kind-up` first.
set -euo pipefail
CLUSTER=${KIND_CLUSTER:-wpbench}
GRADER_IMAGE=${GRADER_IMAGE:-wpbench-grader:dev}
CONTROLLER_IMAGE=${CONTROLLER_IMAGE:-wpbench-controller:dev}
RELEASE_NS=${RELEASE_NS:-wpbench-system}
RUN_NS=${RUN_NS:-wpbench}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")

for tool in docker kind kubectl helm; do
  command -v "$tool" >/dev/null || { echo "kind-up: $tool not found" >&2; exit 1; }
done
version=$(kind version | sed -n 's/^kind v\([0-9]*\.[0-9]*\).*/\1/p')
if [ -n "$version" ] && [ "$(printf '%s\n0.24\n' "$version" | sort -V | head -1)" != "0.24" ]; then
  echo "kind-up: kind $version found; >= 0.24 needed (NetworkPolicy enforcement)" >&2
  exit 1
fi
for image in "$GRADER_IMAGE" "$CONTROLLER_IMAGE"; do
  docker image inspect "$image" >/dev/null 2>&1 || { echo "kind-up: image $image missing (make runtime-image controller-image)" >&2; exit 1; }
done

if ! kind get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
  kind create cluster --name "$CLUSTER" --config "$here/kind-config.yaml" --wait 180s
fi
kubectl config use-context "kind-$CLUSTER" >/dev/null
kind load docker-image "$GRADER_IMAGE" "$CONTROLLER_IMAGE" --name "$CLUSTER"

repo_part=${CONTROLLER_IMAGE%:*}
tag=${CONTROLLER_IMAGE##*:}
helm upgrade --install wpbench "$repo/charts/wpbench-k8s" \
  --kube-context "kind-$CLUSTER" --namespace "$RELEASE_NS" --create-namespace \
  --set image.repository="$repo_part" --set image.tag="$tag" --set image.pullPolicy=IfNotPresent \
  --set "namespaces.runs={$RUN_NS}" --wait --timeout 5m
kubectl --context "kind-$CLUSTER" -n "$RELEASE_NS" rollout status deployment/wpbench-wpbench-k8s-controller --timeout=180s
kubectl --context "kind-$CLUSTER" get ns "$RUN_NS" --show-labels
echo "kind-up: cluster kind-$CLUSTER ready; runs go to namespace $RUN_NS"
