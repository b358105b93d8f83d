#!/usr/bin/env bash
# Delete the kind cluster (idempotent: a missing cluster is fine).
set -euo pipefail
CLUSTER=${KIND_CLUSTER:-wpbench}
if kind get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
  kind delete cluster --name "$CLUSTER"
else
  echo "kind-down: no cluster $CLUSTER"
fi
