"""What only several nodes show, on the kind cluster of `make kind-up` (one control plane, two workers; run with
CLUSTER=kind, `make test-kind`): a drained worker, a worker lost mid-run, graders spread over both workers, and
the deny-all policy between nodes. The controller runs in-cluster from the chart, the real CLI submits."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from clusterkit import KIND_CLUSTER, Space, clone_suite, job_pod, kind_engine_env, pod_facts, records, start_probe_job
from test_node_cluster import CONNECT, ECONNREFUSED, LISTEN

from wpbench_k8s.kube.names import COMPONENT_GRADER

pytestmark = [pytest.mark.docker, pytest.mark.kind_cluster]


def _workers(space: Space) -> list[str]:
    nodes = space.cluster.core.list_node().items
    names = sorted(n.metadata.name for n in nodes if "node-role.kubernetes.io/control-plane" not in n.metadata.labels)
    assert len(names) == 2, names
    return names


def _running_on(space: Space, node: str) -> list[dict[str, Any]]:
    """Grader pods of this test's runs running on `node` (not the run's image probe, which grades nothing)."""
    return [
        p
        for p in space.objects("pods")
        if p["metadata"]["labels"].get("app.kubernetes.io/component") == COMPONENT_GRADER
        and p["spec"].get("nodeName") == node
        and p["status"].get("phase") == "Running"
    ]


def _routes_to_every_other_node(space: Space, node: str) -> bool:
    """Whether `node` routes every other node's pod range (kube-router learns them over BGP after a restart)."""
    others = [n.spec.pod_cidr for n in space.cluster.core.list_node().items if n.metadata.name != node]
    routes = subprocess.run(["docker", "exec", node, "ip", "route"], capture_output=True, text=True,
                            env=kind_engine_env()).stdout  # fmt: skip
    return all(cidr and f"{cidr} via " in routes for cidr in others)


def _controller_node(space: Space) -> str:
    (pod,) = [p for p in space.controller_pods() if not p.metadata.deletion_timestamp]
    return str(pod.spec.node_name)


def _submit(space: Space, suite: Path, in_flight: int, *extra: str) -> str:
    return space.cli("submit", "--check-reference-solution", "--dataset-path", str(suite), "--max-in-flight",
                     str(in_flight), *extra).stdout.strip()  # fmt: skip


def _one_final_record_each(space: Space, name: str, total: int, tmp_path: Path) -> list[dict[str, Any]]:
    """The finished run's records: `total` of them, one per item, every one passed (the reference solutions)."""
    run = space.wait_phase(name, 1200)
    assert run["status"]["phase"] == "Succeeded" and run["status"]["done"] == total, run["status"]
    space.cli("results", name, "-o", str(tmp_path / f"{name}.jsonl"))
    got = records(tmp_path / f"{name}.jsonl")
    ids = [r["item_id"] for r in got]
    assert len(ids) == total and len(set(ids)) == total, ids  # none lost, none duplicated
    assert all(r["grader"]["status"] == "passed" and r["error"] is None for r in got), [r["grader"] for r in got]
    return got


def _node_ready(space: Space, node: str) -> bool:
    conditions = space.cluster.core.read_node(node).status.conditions or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def test_graders_spread_over_both_workers(space: Space, mini_suite: Path, tmp_path: Path) -> None:
    suite = clone_suite(mini_suite, tmp_path / "suite", 8)
    space.install_controller()
    name = _submit(space, suite, 4)
    _one_final_record_each(space, name, 8, tmp_path)
    assert space.pods is not None
    used = set(space.pods.nodes.values())
    assert used == set(_workers(space)), used  # both workers, never the control plane (its taint)
    assert set(space.pods.per_item().values()) == {1}


def test_draining_a_worker_mid_run_retries_its_graders_as_infra_and_loses_nothing(
    space: Space, mini_suite: Path, tmp_path: Path
) -> None:
    suite = clone_suite(mini_suite, tmp_path / "suite", 8)
    space.install_controller()
    name = _submit(space, suite, 4)
    found: dict[str, Any] = {}

    def graders_running() -> bool:
        for node in _workers(space):
            pods = _running_on(space, node)
            if pods:
                found.update(node=node, items={p["metadata"]["annotations"]["wpbench-k8s.org/item-id"] for p in pods})
                return True
        return False

    space.wait_for(graders_running, 300, "a grader running on a worker")
    node = found["node"]
    try:
        # kubectl's drain: cordon, then evict every pod but DaemonSets' through the Eviction API, and wait
        space.cluster.kubectl("drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=300s",
                              timeout=360)  # fmt: skip
        assert not _running_on(space, node)
        got = _one_final_record_each(space, name, 8, tmp_path)
    finally:
        space.cluster.kubectl("uncordon", node, check=False)
    retried = {r["item_id"] for r in got if r["grader"]["infra_retries"] > 0}
    assert found["items"] <= retried, (found["items"], retried)  # each drained grader retried, as infrastructure
    st = space.run_object(name)["status"]
    assert st["infraErrors"] == 0 and st["infraRetries"] >= len(found["items"]), st
    assert space.pods is not None
    after_drain = [n for uid, n in space.pods.nodes.items() if space.pods.uids[uid] in found["items"]]
    assert after_drain.count(node) == len(found["items"])  # the retries ran elsewhere: the node was cordoned


# Without these a pod on a lost node is deleted only after the default 300 s toleration; a run that wants its
# graders back sooner says so in its placement (what this test does).
FAST_NODE_LOSS = {
    "tolerations": [
        {"key": f"node.kubernetes.io/{taint}", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5}
        for taint in ("unreachable", "not-ready")
    ]
}


@pytest.mark.timeout(1500)
def test_a_worker_node_stopped_mid_run_ends_every_item_with_one_final_record(
    space: Space, mini_suite: Path, tmp_path: Path
) -> None:
    suite = clone_suite(mini_suite, tmp_path / "suite", 8)
    placement = tmp_path / "placement.yaml"
    placement.write_text(yaml.safe_dump(FAST_NODE_LOSS))
    space.install_controller()
    name = _submit(space, suite, 4, "--placement", str(placement))
    # the worker without the controller (the one with it would stop the controller too, for the same 300 s)
    (node,) = [n for n in _workers(space) if n != _controller_node(space)]
    found: set[str] = set()

    def graders_running() -> bool:
        found.update(p["metadata"]["annotations"]["wpbench-k8s.org/item-id"] for p in _running_on(space, node))
        return bool(found)

    space.wait_for(graders_running, 300, f"a grader running on {node}")
    env = kind_engine_env()
    subprocess.run(["docker", "stop", "-t", "0", node], check=True, capture_output=True, env=env)
    try:
        space.wait_for(lambda: not _node_ready(space, node), 180, f"{node} NotReady")
        got = _one_final_record_each(space, name, 8, tmp_path)
    finally:
        subprocess.run(["docker", "start", node], check=True, capture_output=True, env=env)
        space.wait_for(lambda: _node_ready(space, node), 300, f"{node} Ready again")
        # Ready is the kubelet's word; pods on other nodes are reachable again once kube-router on the restarted
        # node has its BGP routes back (seen here: a pod-to-pod probe right after Ready timed out)
        space.wait_for(lambda: _routes_to_every_other_node(space, node), 300, f"{node}'s routes to the other nodes")
    retried = {r["item_id"] for r in got if r["grader"]["infra_retries"] > 0}
    assert found <= retried, (found, retried)  # the lost graders' items were graded again: infrastructure
    assert space.run_object(name)["status"]["infraErrors"] == 0


def test_deny_all_holds_between_nodes(space: Space, mini_suite: Path, grader_image: str) -> None:
    here, there = _workers(space)
    target_job = start_probe_job(space, mini_suite, grader_image, "target", LISTEN, policy=False, deadline=900,
                                 cpu="100m", node=there)  # fmt: skip
    target = job_pod(space, target_job, finished=False)
    space.wait_for(lambda: pod_facts(space, target).get("listening"), 120, "the target pod to listen")
    target_ip = space.cluster.core.read_namespaced_pod(target.metadata.name, space.namespace).status.pod_ip
    host, port = space.cluster.api_endpoint()  # on the control-plane node: a third node
    # kube-router programs a new pod's policy chain from the pod's watch event, after the pod has started: a probe
    # at once has been seen here to reach the API server on another node. This probe replaces the grader (and with
    # it the egress gate that holds a grader's task until the wall is up: docs/isolation.md), so it waits instead.
    script = (f"sleep 5; TARGET={target_ip} API_HOST={host} API_PORT={port} SERVICE_IP={space.cluster.service_ip()}"
              f"\n{CONNECT}")  # fmt: skip
    denied_job = start_probe_job(space, mini_suite, grader_image, "net-in", script, cpu="100m", node=here)
    open_job = start_probe_job(space, mini_suite, grader_image, "net-open", script, policy=False, cpu="100m", node=here)
    open_pod, denied_pod = job_pod(space, open_job), job_pod(space, denied_job)
    assert open_pod.spec.node_name == denied_pod.spec.node_name == here != target.spec.node_name
    # Without the policy the pod on the other worker and the API server answer: the network carries them.
    open_ = pod_facts(space, open_pod)
    assert (open_["pod"], open_["apiserver"], open_["service"]) == ("open", "open", "open"), open_
    denied = pod_facts(space, denied_pod)
    assert (denied["apiserver"], denied["service"], denied["pod"]) == (f"closed:{ECONNREFUSED}",) * 3, denied
    assert denied["outside"].startswith("closed:"), denied


def test_kind_cluster_is_one_control_plane_and_two_workers_named_for_the_project(space: Space) -> None:
    nodes = space.cluster.core.list_node().items
    assert sorted(n.metadata.name for n in nodes) == [f"{KIND_CLUSTER}-control-plane", f"{KIND_CLUSTER}-worker",
                                                       f"{KIND_CLUSTER}-worker2"]  # fmt: skip
    assert {n.status.node_info.kubelet_version for n in nodes} == {"v1.37.2"}
    assert all(_node_ready(space, n.metadata.name) for n in nodes)
