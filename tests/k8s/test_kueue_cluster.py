"""Kueue admits the grader Jobs of runs that name a LocalQueue (issue 29), on the real cluster with Kueue
v0.17.0 installed (`KUEUE=1 make cluster-up`, or `make kueue-up` on a running cluster).

Each test makes its own ResourceFlavor, ClusterQueue (selecting only its namespace) and LocalQueue, so tests
beside it are untouched; a run without a queue is checked to be exactly as without Kueue."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import watch

clusterkit = pytest.importorskip("clusterkit", reason="the real-cluster kit (tests/k8s/clusterkit.py) is not here yet")
Space, records = clusterkit.Space, clusterkit.records
pytestmark = [pytest.mark.k8s, pytest.mark.local_cluster]  # Kueue is installed by make cluster-up only

KUEUE = "kueue.x-k8s.io/v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
GRADER_CPU = 0.25  # four graders fit the 2-core node beside the controllers; quota counts requests
GRADER = {"cpu": "250m", "memory": "512Mi"}


@pytest.fixture(scope="session")
def kueue(kube: Any) -> Any:
    """The cluster, with Kueue's controller ready; skipped when Kueue is not installed (it is opt-in)."""
    res = kube.kubectl("get", "deployment", "kueue-controller-manager", "-n", "kueue-system", "-o", "json", check=False)
    ready = res.returncode == 0 and (json.loads(res.stdout).get("status") or {}).get("readyReplicas", 0) >= 1
    if not ready:
        why = "Kueue is not installed on the local cluster (KUEUE=1 make cluster-up, or make kueue-up)"
        if os.environ.get("WPBENCH_KUEUE") == "1":
            pytest.fail(why)
        pytest.skip(why)
    return kube


class Queues:
    """Cluster-scoped Kueue objects of one test (named after its namespace), deleted afterwards."""

    def __init__(self, space: Space) -> None:
        self.space = space
        self.prefix = space.namespace
        self.made: list[tuple[str, str]] = []

    def apply(self, doc: dict[str, Any]) -> None:
        self.space.cluster.kubectl("apply", "-f", "-", input=json.dumps(doc))
        if "namespace" not in doc["metadata"]:
            self.made.append((doc["kind"].lower() + ".kueue.x-k8s.io", doc["metadata"]["name"]))

    def flavor(self) -> str:
        name = f"{self.prefix}-flavor"
        self.apply({"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": name}})
        return name

    def cluster_queue(self, suffix: str, graders: int, **spec: Any) -> str:
        name = f"{self.prefix}-{suffix}"
        flavor = f"{self.prefix}-flavor"
        quota = [{"name": "cpu", "nominalQuota": f"{int(graders * GRADER_CPU * 1000)}m"},
                 {"name": "memory", "nominalQuota": f"{graders * 512}Mi"}]  # fmt: skip
        self.apply({
            "apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name},
            "spec": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": self.space.namespace}},
                "resourceGroups": [{"coveredResources": ["cpu", "memory"],
                                    "flavors": [{"name": flavor, "resources": quota}]}],
                **spec,
            },
        })  # fmt: skip
        return name

    def local_queue(self, name: str, cluster_queue: str) -> str:
        self.apply({"apiVersion": KUEUE, "kind": "LocalQueue",
                    "metadata": {"name": name, "namespace": self.space.namespace},
                    "spec": {"clusterQueue": cluster_queue}})  # fmt: skip
        return name

    def priority(self, suffix: str, value: int) -> str:
        name = f"{self.prefix}-{suffix}"
        self.apply({"apiVersion": KUEUE, "kind": "WorkloadPriorityClass", "metadata": {"name": name}, "value": value})
        return name

    def delete(self) -> None:
        # the namespace's LocalQueues and Workloads go with it; the cluster-scoped objects are ours to remove
        for resource, name in reversed(self.made):
            self.space.cluster.kubectl("delete", resource, name, "--wait=false", "--ignore-not-found", check=False)


@pytest.fixture
def queues(kueue: Any, space: Space) -> Iterator[Queues]:
    q = Queues(space)
    try:
        yield q
    finally:
        q.delete()


class Live:
    """Every grader pod and Job of a namespace as the API server reports them, with the peaks seen: pods
    that exist and have not ended (Pending or Running), Jobs suspended at once, and the order Jobs were
    unsuspended (admitted) in."""

    def __init__(self, space: Space) -> None:
        self.pods: dict[str, str] = {}
        self.suspended: set[str] = set()
        self.admitted: list[str] = []  # Job names, in the order Kueue unsuspended them
        self.peak_pods = 0
        self.peak_suspended = 0
        self.failure = ""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._watches: list[watch.Watch] = []
        ns, core, batch = space.namespace, space.cluster.core, space.cluster.batch
        selector = "app.kubernetes.io/component=grader"
        for fn, handle in ((core.list_namespaced_pod, self._pod), (batch.list_namespaced_job, self._job)):
            version = fn(ns, label_selector=selector).metadata.resource_version
            threading.Thread(target=self._run, args=(fn, ns, selector, version, handle), daemon=True).start()

    def _run(self, fn: Any, ns: str, selector: str, version: str, handle: Any) -> None:
        while not self._stop.is_set():
            w = watch.Watch()
            self._watches.append(w)
            try:
                for ev in w.stream(fn, ns, label_selector=selector, resource_version=version, timeout_seconds=60):
                    if ev["type"] == "ERROR":
                        self.failure = str(ev["raw_object"])
                        return
                    version = ev["object"].metadata.resource_version
                    with self._lock:
                        handle(ev["type"], ev["object"])
            except Exception:  # a dropped connection resumes from the last version seen
                time.sleep(0.5)

    def _pod(self, kind: str, pod: Any) -> None:
        name = pod.metadata.name
        if kind == "DELETED" or pod.status.phase in ("Succeeded", "Failed"):
            self.pods.pop(name, None)
        else:
            self.pods[name] = pod.status.phase
        self.peak_pods = max(self.peak_pods, len(self.pods))

    def _job(self, kind: str, job: Any) -> None:
        name = job.metadata.name
        if kind != "DELETED" and job.spec.suspend:
            self.suspended.add(name)
        elif name in self.suspended:
            self.suspended.discard(name)
            if kind != "DELETED":
                self.admitted.append(name)
        self.peak_suspended = max(self.peak_suspended, len(self.suspended))

    def stop(self) -> None:
        self._stop.set()
        for w in self._watches:
            w.stop()


def suite_config(tmp: Path, suite: Path, **grader: Any) -> Path:
    path = tmp / "wp-bench.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "dataset": {"path": str(suite)},
                "grader": {"image": clusterkit.GRADER_IMAGE, "limits": {"cpus": GRADER_CPU}, **grader},
            }
        )
    )
    return path


def submit(space: Space, config: Path, *args: str) -> str:
    return space.cli(
        "submit", "--config", str(config), "--check-reference-solution", "--no-cache", *args
    ).stdout.strip()


def events(space: Space) -> list[dict[str, Any]]:
    return json.loads(space.cluster.kubectl("get", "events", "-n", space.namespace, "-o", "json").stdout)["items"]


def workloads(space: Space) -> list[dict[str, Any]]:
    res = space.cluster.kubectl("get", "workloads.kueue.x-k8s.io", "-n", space.namespace, "-o", "json")
    return json.loads(res.stdout)["items"]


def test_a_cluster_queue_with_quota_for_two_graders_never_runs_more_than_two(
    space: Space, queues: Queues, mini_suite: Path, tmp_path: Path
) -> None:
    items = 20
    suite = clusterkit.clone_suite(mini_suite, tmp_path / "suite", items)
    queues.flavor()
    queues.local_queue("graders", queues.cluster_queue("cq", graders=2))
    space.install_controller()
    live = Live(space)
    try:
        # the controller's own bound is far above the quota: Kueue alone holds the graders back
        name = submit(space, suite_config(tmp_path, suite), "--queue", "graders", "--max-in-flight", str(items))
        run = space.wait_phase(name, 1500)
    finally:
        live.stop()
    assert not live.failure, live.failure
    assert (run["status"]["phase"], run["status"]["passed"]) == ("Succeeded", items), run["status"]
    assert live.peak_pods == 2, live.peak_pods  # never more than the quota; the quota was used
    assert live.peak_suspended >= items - 2, live.peak_suspended  # the others waited, suspended, in the queue
    assert len(live.admitted) == items  # every grader Job was admitted by Kueue, once
    space.cli("results", name, "-o", str(tmp_path / "r.jsonl"))
    assert {r["grader"]["status"] for r in records(tmp_path / "r.jsonl")} == {"passed"}


def test_a_run_without_a_queue_is_as_without_kueue(
    space: Space, queues: Queues, mini_suite: Path, tmp_path: Path
) -> None:
    # Kueue manages nothing without its label (manageJobsWithoutQueueName: false, and its Job webhooks only
    # see labelled Jobs), even in a namespace a ClusterQueue selects
    queues.flavor()
    queues.local_queue("graders", queues.cluster_queue("cq", graders=1))
    suite = clusterkit.clone_suite(mini_suite, tmp_path / "suite", 3)
    space.install_controller()
    live = Live(space)
    try:
        name = submit(space, suite_config(tmp_path, suite), "--max-in-flight", "3")
        run = space.wait_phase(name, 900)
    finally:
        live.stop()
    assert (run["status"]["phase"], run["status"]["passed"]) == ("Succeeded", 3), run["status"]
    assert live.peak_suspended == 0 and live.admitted == []
    assert workloads(space) == []


def test_two_local_queues_of_one_cohort_share_its_quota(
    space: Space, queues: Queues, mini_suite: Path, tmp_path: Path
) -> None:
    # Each ClusterQueue has quota for one grader; a run alone in one of them borrows the other's idle quota.
    cohort = f"{space.namespace}-cohort"
    queues.flavor()
    queues.local_queue("team-a", queues.cluster_queue("a", graders=1, cohortName=cohort))
    queues.local_queue("team-b", queues.cluster_queue("b", graders=1, cohortName=cohort))
    suite = clusterkit.clone_suite(mini_suite, tmp_path / "suite", 6)
    space.install_controller()
    live = Live(space)
    try:
        name = submit(space, suite_config(tmp_path, suite), "--queue", "team-a", "--max-in-flight", "6")
        run = space.wait_phase(name, 1200)
    finally:
        live.stop()
    assert (run["status"]["phase"], run["status"]["passed"]) == ("Succeeded", 6), run["status"]
    assert live.peak_pods == 2, live.peak_pods  # its own one plus the one borrowed from team-b's queue


def test_a_workload_priority_class_orders_admission(
    space: Space, queues: Queues, mini_suite: Path, tmp_path: Path
) -> None:
    # The ClusterQueue is held while both runs queue, then released: with quota for one grader, Kueue admits
    # every Job of the high-priority run before any of the low one's, though the low run came first.
    queues.flavor()
    cq = queues.cluster_queue("cq", graders=1, stopPolicy="Hold")
    queues.local_queue("graders", cq)
    low, high = queues.priority("low", 10), queues.priority("high", 1000)
    suite = clusterkit.clone_suite(mini_suite, tmp_path / "suite", 3)
    config = suite_config(tmp_path, suite)
    space.install_controller()
    live = Live(space)
    try:
        first = submit(space, config, "--queue", "graders", "--workload-priority-class", low, "--name", "low",
                       "--max-in-flight", "3")  # fmt: skip
        second = submit(space, config, "--queue", "graders", "--workload-priority-class", high, "--name", "high",
                        "--max-in-flight", "3")  # fmt: skip
        space.wait_for(lambda: len(workloads(space)) == 6, 300, "a Workload for each of the six Jobs")
        space.cluster.kubectl("patch", "clusterqueue.kueue.x-k8s.io", cq, "--type=merge",
                              "-p", '{"spec": {"stopPolicy": "None"}}')  # fmt: skip
        for name in (first, second):
            run = space.wait_phase(name, 1200)
            assert run["status"]["passed"] == 3, run["status"]
    finally:
        live.stop()
    order = [job.split("-")[0] for job in live.admitted]
    assert order == ["high"] * 3 + ["low"] * 3, live.admitted


def test_a_grader_kueue_preempts_is_graded_again_never_scored(
    space: Space, queues: Queues, mini_suite: Path, tmp_path: Path
) -> None:
    # A slow grader (45 s: the high run must be submitted and queued while it runs) of a low-priority run is admitted; a high-priority run then needs the only quota, and the
    # ClusterQueue preempts lower priorities: Kueue suspends the low Job (its pod is killed mid-grade) and
    # admits it again later. The killed attempt is infrastructure: the item's record is its later verdict.
    doc = json.loads((mini_suite / "execution" / "hooks.json").read_text())
    test = (doc if isinstance(doc, list) else doc["tests"])[0]
    slow = {**test, "id": "slow-hooks", "reference_solution": "sleep( 45 ); " + test["reference_solution"]}
    (tmp_path / "slow" / "execution").mkdir(parents=True)
    (tmp_path / "slow" / "execution" / "slow.json").write_text(json.dumps([slow]))
    queues.flavor()
    queues.local_queue("graders", queues.cluster_queue("cq", graders=1,
                                                       preemption={"withinClusterQueue": "LowerPriority"}))  # fmt: skip
    low, high = queues.priority("low", 10), queues.priority("high", 1000)
    space.install_controller()
    config = suite_config(tmp_path, tmp_path / "slow", timeout_seconds=120)
    name = submit(space, config, "--queue", "graders", "--workload-priority-class", low, "--name", "low")

    def grading() -> bool:
        pods = space.cluster.core.list_namespaced_pod(
            space.namespace, label_selector="app.kubernetes.io/component=grader"
        )
        return any(p.status.phase == "Running" for p in pods.items)

    space.wait_for(grading, 300, "the low-priority grader to run")
    fast = clusterkit.clone_suite(mini_suite, tmp_path / "fast", 1)
    other = submit(space, suite_config(tmp_path / "fast", fast), "--queue", "graders",
                   "--workload-priority-class", high, "--name", "high")  # fmt: skip
    preempted = space.wait_for(lambda: [e for e in events(space) if e.get("reason") == "Preempted"], 120,
                               "Kueue to preempt the low-priority grader")  # fmt: skip
    print("Kueue:", [e["message"] for e in preempted])
    assert space.wait_phase(other, 600)["status"]["passed"] == 1
    run = space.wait_phase(name, 900)
    assert (run["status"]["phase"], run["status"]["passed"], run["status"]["failed"]) == ("Succeeded", 1, 0), run[
        "status"
    ]
    space.cli("results", name, "-o", str(tmp_path / "r.jsonl"))
    (record,) = records(tmp_path / "r.jsonl")
    assert record["grader"]["status"] == "passed" and record["error"] is None, record
    seen = [(e["involvedObject"]["kind"], e["involvedObject"]["name"], e["reason"]) for e in events(space)]
    assert space.pods is not None and space.pods.per_item()["slow-hooks"] == 2, (
        seen
    )  # the preempted pod, then the one graded


def test_a_grader_whose_workload_kueue_deactivates_ends_as_infrastructure(
    space: Space, queues: Queues, mini_suite: Path, tmp_path: Path
) -> None:
    # A ClusterQueue without quota never admits the Job; its Workload is then deactivated (as Kueue does
    # itself past waitForPodsReady's requeuing limit, or an admin with spec.active: false). Without the
    # controller's Workload watch the Job would wait suspended for ever; with it the attempt is infra, and
    # with no retries left the item ends infra_error (excluded from the score), saying why.
    queues.flavor()
    queues.local_queue("graders", queues.cluster_queue("cq", graders=0))
    suite = clusterkit.clone_suite(mini_suite, tmp_path / "suite", 1)
    space.install_controller()
    name = submit(space, suite_config(tmp_path, suite), "--queue", "graders", "--infra-retries", "0")
    (workload,) = space.wait_for(lambda: workloads(space), 300, "the grader's Workload")
    assert space.run_object(name)["status"]["phase"] == "Running"
    space.cluster.kubectl("patch", "workloads.kueue.x-k8s.io", workload["metadata"]["name"], "-n", space.namespace,
                          "--type=merge", "-p", '{"spec": {"active": false}}')  # fmt: skip
    run = space.wait_phase(name, 300)
    status = run["status"]
    assert (status["done"], status["infraErrors"], status["passed"], status["failed"]) == (1, 1, 0, 0), status
    space.cli("results", name, "-o", str(tmp_path / "r.jsonl"))
    (record,) = records(tmp_path / "r.jsonl")
    assert record["grader"]["status"] == "infra_error" and record["error_type"] == "infra_error", record
    assert "Kueue deactivated its Workload" in record["error"], record
    reasons = [e["reason"] for e in events(space) if e["involvedObject"]["kind"] == "WPBenchRun"]
    assert "InfraError" in reasons, reasons
