# Shared settings of the kind cluster on this machine (sourced by the kind-*.sh scripts). Every address is
# private to this machine: the engine's network namespace reaches the host by one veth pair and nothing else.
KIND_CLUSTER=${KIND_CLUSTER:-wpbench}
K8S_VERSION=v1.37.2
CACHE=${WPBENCH_CACHE:-/var/cache/wpbench}
BIN=$CACHE/k8s/$K8S_VERSION/bin
DEBS=$CACHE/k8s/debs/root
DOCKERD_VERSION=v28.5.2
DOCKERD_BIN=$CACHE/dockerd/$DOCKERD_VERSION/bin
KIND_VERSION=v0.33.0
KIND_BIN=$CACHE/kind/$KIND_VERSION/bin/kind
KIND_STATE=${WPBENCH_KIND_STATE:-/var/lib/wpbench-kind}
KIND_RUN=/run/wpbench-kind # short: a unix socket path is at most 107 bytes
KIND_SOCKET=$KIND_RUN/docker.sock
KIND_DOCKER_HOST=unix://$KIND_SOCKET
KIND_NETNS=wpbench-kind
KIND_VETH=wpbkind0     # host side
KIND_VETH_NS=wpbkind1  # namespace side
KIND_HOST_ADDR=10.250.255.1
KIND_API_ADDR=10.250.255.2 # the API server's published port listens here (kind's apiServerAddress)
KIND_API_PORT=6443
KIND_BIP=10.250.254.1/24   # the engine's default bridge (in its namespace)
KIND_POOL=10.250.0.0/17    # kind's network comes from here
KIND_POD_SUBNET=10.251.0.0/16
KIND_SERVICE_SUBNET=10.252.0.0/16
export PATH="$DEBS/usr/bin:$BIN:$PATH"

log() { printf '%s kind: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "$*"; exit 1; }
