"""Two replicas, one leader; one instance per run; tenant namespaces by label, on the real local Kubernetes.

The Lease loop and its write fence run in-process against the real API server (fast, exact: both electors
share this process's monotonic clock); the chart's replicas, a second release and tenant namespaces run
in-cluster as users deploy them."""

from __future__ import annotations

import json
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from clusterkit import CACHE, Cluster, Space, clone_suite, drop_space, new_space, records

from wpbench_controller.leader import Elector
from wpbench_k8s.kube.client import CONFIG_MAPS, LEASES, Conflict, Fenced, Kube, NotFound, api_client

CTR = [
    str(CACHE / "k8s" / "debs" / "root" / "usr" / "bin" / "ctr"),
    "-a",
    "/run/wpbench-k8s/containerd.sock",
    "-n",
    "k8s.io",
]
FAST = {"lease_seconds": 3.0, "renew_seconds": 2.0, "retry_seconds": 0.5}


def _elector(space: Space, name: str, identity: str) -> Elector:
    return Elector(Kube(api_client(str(space.kubeconfig))), space.namespace, name, identity, **FAST)


def _start(elector: Elector) -> threading.Thread:
    thread = threading.Thread(target=elector.run, daemon=True)
    thread.start()
    return thread


def _wait(predicate: Any, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


# ---- the Lease loop, in-process ---------------------------------------------------------------------
def test_one_leader_and_a_lost_lease_fences_writes_before_anyone_takes_over(space: Space) -> None:
    a, b = _elector(space, "lead", "a"), _elector(space, "lead", "b")
    ta = _start(a)
    _wait(a.leading, 30, "a to lead")
    tb = _start(b)
    leaders: list[tuple[bool, bool]] = []
    for _ in range(40):  # several renewals: b stays a standby while a renews
        leaders.append((a.leading(), b.leading()))
        time.sleep(0.1)
    assert all(x and not y for x, y in leaders), leaders

    # a stops renewing without releasing (as a killed or partitioned pod does)
    a.stop()
    ta.join(10)
    fenced_at = a._until
    writes = Kube(api_client(str(space.kubeconfig)), fence=a.fence)
    _wait(b.leading, 30, "b to take over")
    assert b.since >= fenced_at  # a's fence closed before b's term began (one monotonic clock in this process)
    with pytest.raises(Fenced):
        writes.create(CONFIG_MAPS, space.namespace, {"metadata": {"name": "late-write"}, "data": {}})
    with pytest.raises(NotFound):  # refused before it left the process
        writes.get(CONFIG_MAPS, space.namespace, "late-write")
    spec = writes.get(LEASES, space.namespace, "lead")["spec"]
    assert spec["holderIdentity"] == "b" and spec["leaseTransitions"] == 1
    b.stop()
    tb.join(10)


def test_release_hands_over_at_the_next_try_and_a_standby_never_leads_meanwhile(space: Space) -> None:
    a, b = _elector(space, "handover", "a"), _elector(space, "handover", "b")
    ta = _start(a)
    _wait(a.leading, 30, "a to lead")
    tb = _start(b)
    time.sleep(1.5)  # b has read a's record at least twice and stands by
    assert not b.leading()
    a.stop()
    ta.join(10)
    a.release()
    assert not a.leading()
    _wait(b.leading, 30, "b to lead after the release")
    lease = b.kube.get(LEASES, space.namespace, "handover")
    assert lease["spec"]["holderIdentity"] == "b"
    b.stop()
    tb.join(10)
    b.release()
    assert b.kube.get(LEASES, space.namespace, "handover")["spec"]["holderIdentity"] == ""


def _set_holder(kube: Kube, namespace: str, name: str, holder: str) -> None:
    """Write the Lease's holder as another replica would (again on a conflict with a renewal)."""
    for _ in range(20):
        lease = kube.get(LEASES, namespace, name)
        lease["spec"]["holderIdentity"] = holder
        try:
            kube.replace(LEASES, namespace, name, lease)
            return
        except Conflict:
            continue
    raise AssertionError("the Lease kept changing")


def test_a_pass_begun_in_an_earlier_term_cannot_write_in_a_later_one(space: Space) -> None:
    a = _elector(space, "terms", "a")
    ta = _start(a)
    _wait(a.leading, 30, "a to lead")
    a.serving = a.terms  # as the controller does when a term begins
    writes = Kube(api_client(str(space.kubeconfig)), fence=a.fence)
    writes.create(CONFIG_MAPS, space.namespace, {"metadata": {"name": "in-term"}, "data": {}})
    _set_holder(a.kube, space.namespace, "terms", "b")  # b took the Lease over (a's renewal now conflicts)
    _wait(lambda: not a.leading(), 30, "a to see the Lease lost")
    _set_holder(a.kube, space.namespace, "terms", "")  # b released it
    _wait(lambda: a.leading() and a.terms == 2, 30, "a to lead again")
    with pytest.raises(Fenced, match="began in term 1"):
        writes.create(CONFIG_MAPS, space.namespace, {"metadata": {"name": "late"}, "data": {}})
    with pytest.raises(NotFound):
        writes.get(CONFIG_MAPS, space.namespace, "late")
    a.serving = a.terms  # the next term's work may write
    writes.create(CONFIG_MAPS, space.namespace, {"metadata": {"name": "next-term"}, "data": {}})
    a.stop()
    ta.join(10)


def test_racing_candidates_for_a_new_lease_elect_exactly_one(space: Space) -> None:
    electors = [_elector(space, "race", f"c{n}") for n in range(4)]
    threads = [_start(e) for e in electors]
    _wait(lambda: any(e.leading() for e in electors), 30, "a leader")
    for _ in range(30):
        assert sum(e.leading() for e in electors) == 1
        time.sleep(0.1)
    for e, t in zip(electors, threads, strict=True):
        e.stop()
        t.join(10)


# ---- the chart: two replicas ------------------------------------------------------------------------
def _lease(space: Space, namespace: str | None = None) -> dict[str, Any]:
    lease = space.cluster.kubectl("get", "lease", "-n", namespace or space.namespace,
                                  f"{space.release}-wpbench-k8s-leader", "-o", "json").stdout  # fmt: skip
    spec: dict[str, Any] = json.loads(lease)["spec"]
    return spec


def _leader_pod(space: Space) -> str:
    return str(_lease(space).get("holderIdentity") or "").rsplit("_", 1)[0]


def test_leader_pod_killed_mid_run_hands_over_to_the_standby(space: Space, mini_suite: Path, tmp_path: Path) -> None:
    suite = clone_suite(mini_suite, tmp_path / "suite", 6)
    space.install_controller("controller.replicas=2")
    pods = {p.metadata.name for p in space.controller_pods()}
    assert len(pods) == 2
    space.wait_for(lambda: _leader_pod(space) in pods, 60, "a leader")
    leader = _leader_pod(space)
    (standby,) = pods - {leader}
    transitions = int(_lease(space).get("leaseTransitions") or 0)
    name = space.cli("submit", "--check-reference-solution", "--dataset-path", str(suite), "--max-in-flight", "2"
                     ).stdout.strip()  # fmt: skip
    space.wait_for(lambda: int((space.run_object(name).get("status") or {}).get("done", 0)) >= 1, 300, "progress")
    killed = time.monotonic()
    space.cluster.core.delete_namespaced_pod(leader, space.namespace, grace_period_seconds=0)
    space.wait_for(lambda: _leader_pod(space) == standby, 120, "the standby to take the Lease")
    print(f"pod deleted (grace 0): the standby held the Lease {time.monotonic() - killed:.1f}s later (lease 15s)")
    assert int(_lease(space)["leaseTransitions"]) == transitions + 1

    # then the new leader's process SIGKILLed on the node (no SIGTERM, so no release: the Lease must lapse)
    done = int(space.run_object(name)["status"].get("done", 0))
    space.wait_for(lambda: int(space.run_object(name)["status"].get("done", 0)) > done, 300, "more progress")
    holder = _lease(space)["holderIdentity"]
    (pod,) = [p for p in space.controller_pods() if p.metadata.name == standby]
    container = pod.status.container_statuses[0].container_id.split("://", 1)[1]
    killed = time.monotonic()
    subprocess.run([*CTR, "task", "kill", "-s", "SIGKILL", container], check=True, capture_output=True)
    space.wait_for(lambda: _lease(space)["holderIdentity"] not in ("", holder), 120, "another holder")
    print(f"leader SIGKILLed: another replica held the Lease {time.monotonic() - killed:.1f}s later (lease 15s)")
    assert int(_lease(space)["leaseTransitions"]) == transitions + 2
    run = space.wait_phase(name, 900)
    st = run["status"]
    assert st["phase"] == "Succeeded" and st["done"] == 6, st
    assert st["controller"] == f"{space.namespace}/{space.release}"
    space.cli("results", name, "-o", str(tmp_path / "r.jsonl"))
    ids = [r["item_id"] for r in records(tmp_path / "r.jsonl")]
    assert sorted(ids) == sorted(set(ids)) and len(ids) == 6  # none lost, none duplicated
    assert space.pods is not None and set(space.pods.per_item().values()) == {1}  # nothing graded twice
    # the killed pod's replacement and the restarted container came up: both alive and ready, one leading
    space.wait_for(lambda: len([p for p in space.controller_pods() if _ready(p)]) == 2, 300, "two ready replicas")
    assert _leader_pod(space) in {p.metadata.name for p in space.controller_pods()}


def _full_log(space: Space) -> str:
    return "".join(space.cluster.kubectl("logs", "-n", space.namespace, p.metadata.name).stdout
                   for p in space.controller_pods())  # fmt: skip


def _ready(pod: Any) -> bool:
    if pod.metadata.deletion_timestamp:
        return False
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


# ---- the chart: a second release on the same namespace ----------------------------------------------
def test_a_second_release_on_the_same_namespace_leaves_each_run_to_one_instance(
    kube: Cluster, space: Space, mini_suite: Path, tmp_path: Path
) -> None:
    (tmp_path / "other").mkdir()
    other = new_space(kube, tmp_path / "other", "second release")
    try:
        space.install_controller()
        # release 2 lives in its own namespace and also watches this one (its Role there, its policies)
        other.install_controller(f"namespaces.runs={{{space.namespace}}}")
        names = []
        for n in range(2):  # two suites with distinct item ids, so pods per item count per run
            suite = clone_suite(mini_suite, tmp_path / f"suite{n}", 3)
            tests = suite / "execution" / "bench.json"
            tests.write_text(tests.read_text().replace('"bench-', f'"run{n}-'))
            names.append(space.cli("submit", "--check-reference-solution", "--dataset-path", str(suite)).stdout.strip())
        owners = {}
        for name in names:
            st = space.wait_phase(name, 900)["status"]
            assert st["phase"] == "Succeeded" and st["done"] == 3, st
            owners[name] = st["controller"]
            space.cli("results", name, "-o", str(tmp_path / f"{name}.jsonl"))
            ids = [r["item_id"] for r in records(tmp_path / f"{name}.jsonl")]
            assert len(ids) == len(set(ids)) == 3
        instances = {f"{space.namespace}/{space.release}", f"{other.namespace}/{other.release}"}
        assert set(owners.values()) <= instances, owners
        assert space.pods is not None and set(space.pods.per_item().values()) == {1}  # one grader pod per item
        assert len(space.pods.uids) == 6
        logs = {s.release: _full_log(s) for s in (space, other)}
        for name, owner in owners.items():
            mine = owner.split("/")[1]
            (theirs,) = set(logs) - {mine}
            assert f"run {space.namespace}/{name}: accepted by instance {owner}" in logs[mine]
            assert f"{name}: accepted" not in logs[theirs]
        print(f"instances: {owners}")
    finally:
        drop_space(other)


# ---- the chart: tenant namespaces by label ----------------------------------------------------------
def test_a_namespace_labelled_after_start_is_served_and_an_unlabelled_one_is_not(
    kube: Cluster, space: Space, mini_suite: Path, tmp_path: Path
) -> None:
    key = f"wpbench-k8s.org/tenant-{uuid.uuid4().hex[:8]}"  # this test's label: no other namespace carries it
    space.install_controller(f"namespaces.selector.{key.replace('.', chr(92) + '.')}=yes")
    (tmp_path / "tenant").mkdir()
    tenant = new_space(kube, tmp_path / "tenant", "tenant namespace")
    try:
        name = tenant.cli("submit", "--check-reference-solution", "--dataset-path", str(mini_suite),
                          "--test-id", "mini-hooks-001").stdout.strip()  # fmt: skip
        # the listed namespace is served: a run there finishes while the tenant's waits untouched
        home = space.cli("submit", "--check-reference-solution", "--dataset-path", str(mini_suite),
                         "--test-id", "mini-hooks-001").stdout.strip()  # fmt: skip
        assert space.wait_phase(home, 600)["status"]["phase"] == "Succeeded"
        assert not tenant.run_object(name).get("status")
        assert tenant.pods is not None and not tenant.pods.uids

        # the platform team's onboarding: the controller's rights there, then the label (no restart)
        cluster_name = f"{space.release}-wpbench-k8s-{space.namespace}"[:56].rstrip("-")
        kube.kubectl("-n", tenant.namespace, "create", "rolebinding", "wpbench-controller",
                     f"--clusterrole={cluster_name}-controller",
                     f"--serviceaccount={space.namespace}:{space.release}-wpbench-k8s")  # fmt: skip
        restarts = {p.metadata.name: p.status.container_statuses[0].restart_count for p in space.controller_pods()}
        kube.kubectl("label", "namespace", tenant.namespace, f"{key}=yes")
        st = tenant.wait_phase(name, 600)["status"]
        assert st["phase"] == "Succeeded" and st["controller"] == f"{space.namespace}/{space.release}", st
        assert set(tenant.pods.per_item().values()) == {1}
        now = {p.metadata.name: p.status.container_statuses[0].restart_count for p in space.controller_pods()}
        assert now == restarts  # served without a restart

        # a submitter there (the chart's submitter ClusterRole, bound in the tenant namespace) may make a payload
        # ConfigMap but not stored state: the admission policy follows the label
        kube.kubectl("-n", tenant.namespace, "create", "rolebinding", "alice",
                     f"--clusterrole={cluster_name}-submitter", "--user=alice")  # fmt: skip
        as_alice = ("-n", tenant.namespace, "--as=alice", "create", "configmap")
        kube.kubectl(*as_alice, "payload-of-alice", "--from-literal=x=1")
        planted = kube.kubectl(*as_alice, f"{name}-results-9", "--from-literal=x=1", check=False)
        assert planted.returncode != 0 and "written by the controller only" in planted.stderr, planted.stderr

        # unlabelled again: a new run there is left alone
        kube.kubectl("label", "namespace", tenant.namespace, f"{key}-")
        space.wait_for(lambda: f"namespace {tenant.namespace} no longer matches" in _full_log(space), 120,
                       "the controller to drop the namespace")  # fmt: skip
        late = tenant.cli("submit", "--check-reference-solution", "--dataset-path", str(mini_suite),
                          "--test-id", "mini-hooks-001").stdout.strip()  # fmt: skip
        home2 = space.cli("submit", "--check-reference-solution", "--dataset-path", str(mini_suite),
                          "--test-id", "mini-hooks-001").stdout.strip()  # fmt: skip
        assert space.wait_phase(home2, 600)["status"]["phase"] == "Succeeded"
        assert not tenant.run_object(late).get("status")
    finally:
        drop_space(tenant)
