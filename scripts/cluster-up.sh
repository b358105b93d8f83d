#!/usr/bin/env bash
# Starts (or reuses) a single-node Kubernetes v1.37.2 on this machine: etcd, kube-apiserver (RBAC, Node
# authorizer, default admission plugins incl. PodSecurity), kube-controller-manager, kube-scheduler,
# containerd (own root, state and socket, beside Docker's), a real kubelet, a bridge CNI without
# masquerade, kube-router as the NetworkPolicy enforcer (policy only: no routing, no service proxy). Merges context wpbench-local into the default kubeconfig, imports the grader and
# controller images into the node, installs charts/wpbench-k8s with helm. Idempotent: what runs is kept,
# what is missing is built (cached by version) or started. Needs root, Docker, Go, gcc, openssl. With KUEUE=1 it
# also installs Kueue (scripts/kueue-up.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
# shellcheck source=scripts/cluster-env.sh
source "$here/cluster-env.sh"
GRADER_IMAGE=${GRADER_IMAGE:-wpbench-grader:dev}
CONTROLLER_IMAGE=${CONTROLLER_IMAGE:-wpbench-controller:dev}
started=$SECONDS

[[ $EUID -eq 0 ]] || die "needs root (it starts a kubelet and containerd)"

install_binaries() {
  "$repo/hack/k8s/binaries.sh"
  local pkgs=()
  command -v runc >/dev/null || pkgs+=(runc)
  command -v ipset >/dev/null || pkgs+=(ipset)  # kube-router keeps each policy's pod sets in ipsets
  if ((${#pkgs[@]})); then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}" >/dev/null
  fi
  command -v openssl >/dev/null || die "openssl not found"
}

host_setup() {
  mount --make-rshared /
  sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1 >/dev/null 2>&1 || true
  if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
    ip link add "$BRIDGE" type bridge
  fi
  # no `| grep -q` under pipefail: grep's early exit can fail the pipeline (SIGPIPE) although the address is there
  [[ $(ip -4 addr show dev "$BRIDGE") == *"inet $GATEWAY/"* ]] || ip addr add "$GATEWAY/${POD_CIDR#*/}" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  # Pods talk to each other and to this host only: nothing from the pod bridge is forwarded elsewhere,
  # nothing is masqueraded. The kubernetes Service address is answered by the API server on the gateway.
  ensure_rule filter FORWARD -i "$BRIDGE" -o "$BRIDGE" -j ACCEPT
  ensure_rule filter FORWARD -i "$BRIDGE" ! -o "$BRIDGE" -j DROP
  ensure_rule filter FORWARD ! -i "$BRIDGE" -o "$BRIDGE" -j DROP
  ensure_rule nat PREROUTING -s "$POD_CIDR" -d "$KUBERNETES_SERVICE_IP/32" -p tcp --dport 443 \
    -j DNAT --to-destination "$GATEWAY:$API_PORT"
  ip route replace blackhole "$SERVICE_CIDR"
}

ensure_rule() { # table chain rule... : insert at the top unless present
  local table=$1 chain=$2
  shift 2
  iptables -t "$table" -C "$chain" "$@" 2>/dev/null || iptables -t "$table" -I "$chain" 1 "$@"
}


write_kubeconfig() { # file user cert : context $CONTEXT as user, its client certificate $PKI/cert.crt embedded
  KUBECONFIG=$1 kubectl config set-cluster "$CONTEXT" --server="https://$GATEWAY:$API_PORT" \
    --certificate-authority="$PKI/ca.crt" --embed-certs >/dev/null
  KUBECONFIG=$1 kubectl config set-credentials "$2" --client-certificate="$PKI/$3.crt" \
    --client-key="$PKI/$3.key" --embed-certs >/dev/null
  KUBECONFIG=$1 kubectl config set-context "$CONTEXT" --cluster="$CONTEXT" --user="$2" >/dev/null
  KUBECONFIG=$1 kubectl config use-context "$CONTEXT" >/dev/null
}

kubeconfig() { # user cert : a component's own kubeconfig, written once
  [[ -f $PKI/$2.kubeconfig ]] || write_kubeconfig "$PKI/$2.kubeconfig" "$1" "$2"
}

pki() {
  mkdir -p "$PKI" && chmod 700 "$PKI"
  if [[ ! -f $PKI/ca.crt ]]; then
    openssl genrsa -out "$PKI/ca.key" 2048 2>/dev/null
    # keyUsage on the CA: strict verifiers (Python >= 3.13, the controller image's) refuse a CA without it
    openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=wpbench-local-ca" -days 3650 -sha256 -out "$PKI/ca.crt" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature"
  fi
  [[ -f $PKI/sa.key ]] || { openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null && openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null; }
  cert apiserver kube-apiserver "" "IP:$GATEWAY" "IP:$KUBERNETES_SERVICE_IP" IP:127.0.0.1 DNS:localhost \
    DNS:kubernetes DNS:kubernetes.default DNS:kubernetes.default.svc DNS:kubernetes.default.svc.cluster.local
  cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
  cert admin wpbench-local-admin system:masters
  cert controller-manager system:kube-controller-manager ""
  cert scheduler system:kube-scheduler ""
  cert kubelet-client "system:node:$NODE_NAME" system:nodes
  cert kubelet-serving "system:node:$NODE_NAME" system:nodes "IP:$GATEWAY" "DNS:$NODE_NAME"
  cert kube-router kube-router ""
  kubeconfig "$CONTEXT-admin" admin
  kubeconfig system:kube-controller-manager controller-manager
  kubeconfig system:kube-scheduler scheduler
  kubeconfig "system:node:$NODE_NAME" kubelet-client
  kubeconfig kube-router kube-router
}

start() { # name command... : start detached unless running; log to $LOGS/name.log
  local name=$1
  shift
  if pid_of "$name" >/dev/null; then return; fi
  log "starting $name"
  # the process writes its own pid (setsid may fork), then becomes the component
  setsid bash -c 'echo $$ >"$0"; exec "$@"' "$RUN/$name.pid" "$@" >>"$LOGS/$name.log" 2>&1 </dev/null &
  local deadline=$((SECONDS + 10))
  until pid_of "$name" >/dev/null; do ((SECONDS < deadline)) || die "$name did not start"; sleep 0.1; done
}


clean_stale_node() {
  # Nothing of the node runs (after a restart, or processes killed): drop what the dead runtime left.
  pid_of containerd >/dev/null && return
  stop_pods
}

start_control_plane() {
  start etcd etcd --name wpbench --data-dir "$STATE/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "wpbench=http://127.0.0.1:$ETCD_PEER_PORT" --quota-backend-bytes 4294967296
  wait_for etcd 60 curl -fsS "http://127.0.0.1:$ETCD_CLIENT_PORT/health"
  start kube-apiserver kube-apiserver --etcd-servers "http://127.0.0.1:$ETCD_CLIENT_PORT" \
    --bind-address "$GATEWAY" --advertise-address "$GATEWAY" --secure-port "$API_PORT" \
    --service-cluster-ip-range "$SERVICE_CIDR" --authorization-mode Node,RBAC \
    --enable-admission-plugins NodeRestriction \
    --client-ca-file "$PKI/ca.crt" --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
    --kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" --kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
    --kubelet-preferred-address-types InternalIP --profiling=false
  wait_for kube-apiserver 120 kubectl --kubeconfig "$PKI/admin.kubeconfig" get --raw /readyz
  start kube-controller-manager kube-controller-manager --kubeconfig "$PKI/controller-manager.kubeconfig" \
    --authentication-kubeconfig "$PKI/controller-manager.kubeconfig" --authorization-kubeconfig "$PKI/controller-manager.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port 10357 --leader-elect=false --use-service-account-credentials \
    --service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
    --cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" --profiling=false
  start kube-scheduler kube-scheduler --kubeconfig "$PKI/scheduler.kubeconfig" \
    --authentication-kubeconfig "$PKI/scheduler.kubeconfig" --authorization-kubeconfig "$PKI/scheduler.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port 10359 --leader-elect=false --profiling=false
}

write_node_config() {
  mkdir -p "$STATE/cni/net.d" "$STATE/kubelet" "$STATE/containerd"
  # Routes only to the pod and service ranges: a pod has no default route, so no way off this machine.
  cat >"$STATE/cni/net.d/10-wpbench.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "wpbench", "plugins": [
  {"type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "isDefaultGateway": false, "ipMasq": false,
   "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": "$STATE/cni/ipam",
            "ranges": [[{"subnet": "$POD_CIDR", "gateway": "$GATEWAY", "rangeStart": "${GATEWAY%.*}.10"}]],
            "routes": [{"dst": "$POD_CIDR"}, {"dst": "$SERVICE_CIDR"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}
]}
EOF
  cat >"$STATE/containerd.toml" <<EOF
version = 3
root = "$STATE/containerd"
state = "$RUN/containerd"
disabled_plugins = ["io.containerd.nri.v1.nri"]
[grpc]
  address = "$CONTAINERD_SOCK"
[ttrpc]
  address = "$CONTAINERD_SOCK.ttrpc"
[plugins.'io.containerd.internal.v1.opt']
  path = "$STATE/containerd-opt"
[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = "$PAUSE_IMAGE"
[plugins.'io.containerd.cri.v1.runtime']
  # This machine grants no CAP_SYS_RESOURCE: a negative oom_score_adj (the kubelet asks -998 for sandboxes,
  # -997 for Guaranteed pods) cannot be set, so runc fails "failed to update /proc/self/oom_score_adj".
  restrict_oom_score_adj = true
[plugins.'io.containerd.cri.v1.runtime'.containerd]
  default_runtime_name = "runc"
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
  BinaryName = "$(command -v runc)"
  Root = "$RUN/runc"
  SystemdCgroup = false
[plugins.'io.containerd.cri.v1.runtime'.cni]
  bin_dirs = ["$DEBS/usr/lib/cni"]
  conf_dir = "$STATE/cni/net.d"
[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
EOF
  # cgroup v1 without systemd here: cgroupfs, and failCgroupV1 off (kubelet >= 1.35 refuses v1 otherwise).
  # Images cannot be pulled back (no registry), so image GC never runs; no DNS server (pods resolve nothing).
  cat >"$STATE/kubelet.yaml.new" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $GATEWAY
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: $PKI/kubelet-serving.crt
tlsPrivateKeyFile: $PKI/kubelet-serving.key
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
resolvConf: ""
clusterDomain: cluster.local
podCIDR: $POD_CIDR
podPidsLimit: $POD_PIDS_LIMIT
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
EOF
  # A changed kubelet configuration takes effect by a kubelet restart (its pods keep running in containerd).
  if cmp -s "$STATE/kubelet.yaml.new" "$STATE/kubelet.yaml"; then
    rm -f "$STATE/kubelet.yaml.new"
  else
    mv "$STATE/kubelet.yaml.new" "$STATE/kubelet.yaml"
    stop kubelet
  fi
}


start_node() {
  write_node_config
  start containerd containerd --config "$STATE/containerd.toml"
  wait_for containerd 60 ctr -a "$CONTAINERD_SOCK" version
  "$repo/hack/k8s/build-pause.sh" "$PAUSE_IMAGE" >&2
  import_image "$PAUSE_IMAGE" || true
  start kubelet kubelet --config "$STATE/kubelet.yaml" --kubeconfig "$PKI/kubelet-client.kubeconfig" \
    --hostname-override "$NODE_NAME" --node-ip "$GATEWAY" --root-dir "$STATE/kubelet" --cert-dir "$PKI/kubelet"
  wait_for "node $NODE_NAME" 180 kubectl --kubeconfig "$PKI/admin.kubeconfig" wait --for=condition=Ready \
    "node/$NODE_NAME" --timeout=5s
}

start_network_policy() {
  # kube-router enforces NetworkPolicy with iptables and ipsets (this kernel has no nft queue, which
  # kube-network-policies needs). Policy only: the bridge CNI gives pods their addresses, and there is no
  # kube-proxy.
  kubectl --kubeconfig "$PKI/admin.kubeconfig" apply -f "$here/kube-router-rbac.yaml" >/dev/null
  start kube-router "$KUBE_ROUTER" --kubeconfig "$PKI/kube-router.kubeconfig" --hostname-override "$NODE_NAME" \
    --run-firewall=true --run-router=false --run-service-proxy=false --enable-cni=false \
    --service-cluster-ip-range "$SERVICE_CIDR" --health-addr 127.0.0.1 --health-port "$KUBE_ROUTER_HEALTH_PORT"
  wait_for kube-router 120 curl -fsS "http://127.0.0.1:$KUBE_ROUTER_HEALTH_PORT/healthz"
}

merge_kubeconfig() {
  local target=${KUBECONFIG:-$HOME/.kube/config}
  target=${target%%:*}
  mkdir -p "$(dirname "$target")"
  write_kubeconfig "$target" "$CONTEXT-admin" admin
}

# The chart renders the CRD only for the release that owns it (releases share a cluster). A CRD left with no
# live owner (its release uninstalled: the CRD is kept; or created outside Helm) would never be upgraded
# again, so this release adopts it the way Helm adopts an existing object: its ownership annotations and label.
adopt_crd() {
  local k=(kubectl --kubeconfig "$PKI/admin.kubeconfig") crd=wpbenchruns.wpbench-k8s.org owner owner_ns
  "${k[@]}" get crd "$crd" >/dev/null 2>&1 || return 0
  owner=$("${k[@]}" get crd "$crd" -o jsonpath='{.metadata.annotations.meta\.helm\.sh/release-name}')
  owner_ns=$("${k[@]}" get crd "$crd" -o jsonpath='{.metadata.annotations.meta\.helm\.sh/release-namespace}')
  if [[ -n $owner ]] && helm status "$owner" -n "$owner_ns" --kubeconfig "$PKI/admin.kubeconfig" >/dev/null 2>&1; then
    return 0
  fi
  log "the CRD has no live Helm owner (${owner:-none}): release $RELEASE adopts it"
  "${k[@]}" annotate crd "$crd" --overwrite "meta.helm.sh/release-name=$RELEASE" \
    "meta.helm.sh/release-namespace=$RELEASE_NS" >/dev/null
  "${k[@]}" label crd "$crd" --overwrite app.kubernetes.io/managed-by=Helm >/dev/null
}

install_chart() {
  adopt_crd
  import_image "$GRADER_IMAGE" || true
  local repo_part=${CONTROLLER_IMAGE%:*} tag=${CONTROLLER_IMAGE##*:} restart=false
  import_image "$CONTROLLER_IMAGE" && restart=true
  helm upgrade --install "$RELEASE" "$repo/charts/wpbench-k8s" --kubeconfig "$PKI/admin.kubeconfig" \
    --namespace "$RELEASE_NS" --create-namespace \
    --set image.repository="$repo_part" --set image.tag="$tag" --set image.pullPolicy=IfNotPresent \
    --set "namespaces.runs={$RUN_NS}" --wait --timeout 5m >/dev/null
  # A controller image rebuilt under the same tag: restart so the pod runs the imported one.
  if $restart; then
    kubectl --kubeconfig "$PKI/admin.kubeconfig" -n "$RELEASE_NS" rollout restart \
      "deployment/$RELEASE-wpbench-k8s-controller" >/dev/null
  fi
  kubectl --kubeconfig "$PKI/admin.kubeconfig" -n "$RELEASE_NS" rollout status \
    "deployment/$RELEASE-wpbench-k8s-controller" --timeout=180s >/dev/null
}

mkdir -p "$STATE" "$RUN" "$LOGS"
install_binaries
host_setup
pki
clean_stale_node
start_control_plane
start_node
start_network_policy
merge_kubeconfig
if [[ ${KUEUE:-0} == 1 ]]; then "$here/kueue-up.sh"; fi
install_chart
log "ready in $((SECONDS - started)) s: context $CONTEXT (node $NODE_NAME, API https://$GATEWAY:$API_PORT); runs go to namespace $RUN_NS"
