#!/usr/bin/env bash
# Kueue (KUEUE=1): its manager built from the Go module (hack/kueue/build.sh), in an image on the local base,
# its CRDs, RBAC and webhooks from the module's config/ (hack/kueue/manifests.py says what differs here).
# It acts only on Jobs labelled kueue.x-k8s.io/queue-name; the cluster's other Jobs never reach it.
# Run by cluster-up.sh with KUEUE=1, or on its own (`make kueue-up`) against a cluster that runs: it touches
# nothing but the kueue-system namespace, Kueue's CRDs, cluster role and webhook configurations. Idempotent.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
# shellcheck source=scripts/cluster-env.sh
source "$here/cluster-env.sh"
install_kueue() {
  local version=${KUEUE_VERSION:-v0.17.0} k=(kubectl --kubeconfig "$PKI/admin.kubeconfig") bin image ctx base
  bin=$("$repo/hack/kueue/build.sh")
  image="wpbench-kueue:$version"
  if ! docker image inspect "$image" >/dev/null 2>&1; then
    log "building $image"
    base=debian:sid-slim
    docker image inspect wpbench-base:sid >/dev/null 2>&1 && base=wpbench-base:sid
    ctx=$(mktemp -d)
    cp "$bin/kueue" "$repo/hack/kueue/Dockerfile" "$ctx/"
    docker build -q --build-arg BASE_IMAGE="$base" -t "$image" "$ctx" >/dev/null
    rm -rf "$ctx"
  fi
  import_image "$image" || true
  cert kueue-webhook kueue-webhook "" "IP:$GATEWAY"
  "${PYTHON:-$repo/.venv/bin/python}" "$repo/hack/kueue/manifests.py" \
    --module "${GOMODCACHE:-$CACHE/go/mod}/sigs.k8s.io/kueue@$version" \
    --address "$GATEWAY" --image "$image" --ca-file "$PKI/ca.crt" --api-port "$API_PORT" \
    --webhook-port "$KUEUE_WEBHOOK_PORT" --health-port "$KUEUE_HEALTH_PORT" >"$STATE/kueue.yaml"
  # the serving certificate before the manager that mounts it
  "${k[@]}" create namespace kueue-system --dry-run=client -o yaml | "${k[@]}" apply --server-side -f - >/dev/null
  "${k[@]}" -n kueue-system create secret tls kueue-webhook-server-cert --cert "$PKI/kueue-webhook.crt" \
    --key "$PKI/kueue-webhook.key" --dry-run=client -o yaml | "${k[@]}" apply -f - >/dev/null
  "${k[@]}" apply --server-side --force-conflicts -f "$STATE/kueue.yaml" >/dev/null
  "${k[@]}" -n kueue-system rollout status deployment/kueue-controller-manager --timeout=180s >/dev/null
  # Ready once its webhooks answer: a server-side dry run of a ResourceFlavor goes through them.
  wait_for "Kueue's webhooks" 120 bash -c "printf '%s' '{\"apiVersion\": \"kueue.x-k8s.io/v1beta2\",
    \"kind\": \"ResourceFlavor\", \"metadata\": {\"name\": \"probe\"}}' |
    kubectl --kubeconfig '$PKI/admin.kubeconfig' create --dry-run=server -f -"
  log "Kueue $version ready (webhooks on https://$GATEWAY:$KUEUE_WEBHOOK_PORT)"
}

install_kueue
