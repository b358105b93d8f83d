# Shared settings of the local Kubernetes (sourced by cluster-up.sh and cluster-down.sh).
# Every address is on this machine: the pod bridge is ours, its gateway is the node and API server address.
K8S_VERSION=v1.37.2
CACHE=${WPBENCH_CACHE:-/var/cache/wpbench}
BIN=$CACHE/k8s/$K8S_VERSION/bin
DEBS=$CACHE/k8s/debs/root
KUBE_ROUTER_VERSION=$(awk '$1 == "require" && $2 == "github.com/cloudnativelabs/kube-router/v2" {print $3}' \
  "$(dirname "${BASH_SOURCE[0]}")/../hack/kube-router/go.mod")
KUBE_ROUTER=$CACHE/kube-router/$KUBE_ROUTER_VERSION/bin/kube-router
KUBE_ROUTER_HEALTH_PORT=20244
# Kueue (KUEUE=1) runs on the host network: its webhooks and health probe listen on the node address.
KUEUE_WEBHOOK_PORT=19443
KUEUE_HEALTH_PORT=19444
STATE=${WPBENCH_CLUSTER_STATE:-/var/lib/wpbench-k8s}
RUN=${WPBENCH_CLUSTER_RUN:-/run/wpbench-k8s}
LOGS=$STATE/logs
PKI=$STATE/pki
CONTEXT=wpbench-local
NODE_NAME=wpbench-node
BRIDGE=wpbk0
POD_CIDR=10.244.0.0/24
GATEWAY=10.244.0.1
SERVICE_CIDR=10.96.0.0/16
KUBERNETES_SERVICE_IP=10.96.0.1
API_PORT=16443
ETCD_CLIENT_PORT=23790
ETCD_PEER_PORT=23800
CONTAINERD_SOCK=$RUN/containerd.sock
PAUSE_IMAGE=wpbench.local/pause:3.10.2
RELEASE=wpbench
RELEASE_NS=wpbench-system
RUN_NS=${RUN_NS:-wpbench}
POD_PIDS_LIMIT=256  # the kubelet's bound on the processes of one pod, as scripts/kind-config.yaml sets it
COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet kube-router)
export PATH="$DEBS/usr/bin:$BIN:$PATH"

log() { printf '%s cluster: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "$*"; exit 1; }

pid_of() { # prints the pid of a component started by cluster-up if it is alive
  local f="$RUN/$1.pid" pid
  [[ -f $f ]] || return 1
  pid=$(<"$f")
  # a pid left from before a restart may belong to another program now
  tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -q -- "$1" && echo "$pid"
}

stop() { # name : stop a component started by cluster-up (TERM, then KILL after 10 s)
  local pid
  pid=$(pid_of "$1") || { rm -f "$RUN/$1.pid"; return 0; }
  log "stopping $1"
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$RUN/$1.pid"
}

stop_pods() { # kill every pod process and shim of our containerd; unmount what they left
  local procs pid m ns
  if [[ -d /sys/fs/cgroup/pids/kubepods ]]; then
    for procs in $(find /sys/fs/cgroup/pids/kubepods -name cgroup.procs); do
      while read -r pid; do kill -9 "$pid" 2>/dev/null || true; done <"$procs"
    done
  fi
  pkill -9 -f -- "containerd-shim-runc-v2 .*-address $CONTAINERD_SOCK" 2>/dev/null || true
  for m in $(awk -v a="$STATE/" -v b="$RUN/" 'index($2, a) == 1 || index($2, b) == 1 {print $2}' /proc/self/mounts | sort -r); do
    umount -l "$m" 2>/dev/null || true
  done
  # pod network namespaces (containerd names them cni-*) that no process holds any more
  for ns in /run/netns/cni-*; do
    [[ -e $ns && -z $(ip netns pids "${ns##*/}" 2>/dev/null) ]] && ip netns delete "${ns##*/}" 2>/dev/null || true
  done
  rm -rf "$RUN/containerd" "$STATE/cni/ipam"
}

wait_for() { # what seconds command... : poll until the command succeeds
  local what=$1 limit=$2
  shift 2
  local deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || die "$what not ready after ${limit}s (logs: $LOGS)"
    sleep 0.5
  done
}

cert() { # name cn org [san...] : a key and a certificate signed by the cluster CA, unless present
  local name=$1 cn=$2 org=$3
  shift 3
  [[ -f $PKI/$name.crt ]] && return
  local subj="/CN=$cn" ext="$PKI/$name.ext"
  [[ -n $org ]] && subj="/O=$org$subj"
  openssl genrsa -out "$PKI/$name.key" 2048 2>/dev/null
  openssl req -new -key "$PKI/$name.key" -subj "$subj" -out "$PKI/$name.csr" 2>/dev/null
  {
    echo "basicConstraints=CA:FALSE"
    echo "subjectKeyIdentifier=hash"
    echo "authorityKeyIdentifier=keyid,issuer"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    if (($#)); then
      echo "extendedKeyUsage=serverAuth,clientAuth"
      local IFS=,
      echo "subjectAltName=$*"
    else
      echo "extendedKeyUsage=clientAuth"
    fi
  } >"$ext"
  openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
    -days 3650 -sha256 -extfile "$ext" -out "$PKI/$name.crt" 2>/dev/null
  rm -f "$PKI/$name.csr" "$ext"
}

import_image() { # docker image : into the node's containerd (k8s.io namespace), unless already that id
  local image=$1 id stamp
  id=$(docker image inspect -f '{{.Id}}' "$image" 2>/dev/null) || die "image $image missing in Docker"
  stamp="$STATE/images/${image//[\/:]/_}"
  [[ -f $stamp && $(<"$stamp") == "$id" ]] && [[ $(ctr -a "$CONTAINERD_SOCK" -n k8s.io images ls -q) == *"$image"* ]] && return 1
  log "importing $image into the node"
  mkdir -p "$STATE/images"
  docker save "$image" | ctr -a "$CONTAINERD_SOCK" -n k8s.io images import - >/dev/null
  echo "$id" >"$stamp"
}
