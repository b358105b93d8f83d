"""The controller's behaviour that only a real cluster shows (issue 9), on the local Kubernetes of
`make cluster-up`: a real kubelet's deadline, the scheduler, the API server, kubectl and the node's
network. Each checks a behaviour issue 9 reported broken before the fix (the dry-run file applied;
the deadline ended as harness_error; an unschedulable run stayed Running with an empty message), and
one backend-parity check (a name lookup ends alike on both backends)."""

from __future__ import annotations

import contextlib
import json
import threading
from pathlib import Path

import pytest
import yaml
from kubernetes import watch
from kubernetes.client.exceptions import ApiException

from wpbench_k8s.cluster import Cluster, submit
from wpbench_k8s.config import load_config
from wpbench_k8s.executor import get_executor
from wpbench_k8s.kube.facts import job_finished
from wpbench_k8s.kube.names import managed_graders_selector
from wpbench_k8s.kube.objects import RunSettings
from wpbench_k8s.manifest import GraderLimits, GraderSpec
from wpbench_k8s.outcome import Infra, decide_outcome
from wpbench_k8s.pipeline import plan_run
from wpbench_runtime.contract import GradeTask

clusterkit = pytest.importorskip("clusterkit", reason="the real-cluster kit (tests/k8s/clusterkit.py) is not here yet")
Space, records = clusterkit.Space, clusterkit.records
pytestmark = pytest.mark.k8s


def _submit(space: Space, suite: Path, name: str, grader: GraderSpec, *, retries: int, test_id: str) -> str:
    manifest = plan_run(load_config(None, {"dataset.path": str(suite), "run.test_ids": [test_id]}), "reference",
                        grader=grader)  # fmt: skip
    cluster = Cluster(str(space.kubeconfig), None, space.namespace)
    return submit(cluster, manifest, RunSettings(name=name, namespace=space.namespace, infra_retries=retries))


def _shorten_grader_deadlines(space: Space, seconds: int, stop: threading.Event) -> None:
    """Cut each new grader pod's activeDeadlineSeconds (a pod field that may only be lowered) to `seconds`, as a
    slow node would leave a grader too little of its deadline: the kubelet, not the grader, ends the attempt."""
    w = watch.Watch()
    cut: set[str] = set()
    while not stop.is_set():
        stream = w.stream(space.cluster.core.list_namespaced_pod, space.namespace,
                          label_selector=managed_graders_selector(), timeout_seconds=5)  # fmt: skip
        for event in stream:
            pod = event["object"]
            if stop.is_set() or pod.metadata.name in cut or pod.metadata.deletion_timestamp:
                continue
            cut.add(pod.metadata.name)
            with contextlib.suppress(ApiException):  # gone already
                space.cluster.core.patch_namespaced_pod(pod.metadata.name, space.namespace,
                                                        {"spec": {"activeDeadlineSeconds": seconds}})  # fmt: skip


def test_a_grader_stopped_at_its_pod_deadline_is_retried_then_scored_as_the_candidates_timeout(
    space: Space, mini_suite: Path, tmp_path: Path
) -> None:
    # The pod deadline covers the setup and candidate budgets, so a grader ends first on its own; here each grader
    # pod's deadline is cut to 1 s once it exists: the kubelet (SIGTERM, then SIGKILL) ends the grader before its
    # verdict. That is the outer deadline (outcome rule 3), whatever the supervisor exits with.
    space.install_controller()
    stop = threading.Event()
    cutter = threading.Thread(target=_shorten_grader_deadlines, args=(space, 1, stop), daemon=True)
    cutter.start()
    try:
        name = _submit(space, mini_suite, "deadline", GraderSpec(timeout_seconds=30, grace_seconds=0), retries=1,
                       test_id="mini-hooks-001")  # fmt: skip
        run = space.wait_phase(name, 600)
    finally:
        stop.set()
    space.cli("results", name, "-o", str(tmp_path / "r.jsonl"))
    (record,) = records(tmp_path / "r.jsonl")
    assert record["grader"]["status"] == "timeout", record["grader"]
    assert record["grader"]["infra_retries"] == 1 and record["error"] is None
    assert "deadline" in record["grader"]["verdict"]["reason"]
    assert run["status"]["infraErrors"] == 0 and run["status"]["failed"] == 1
    assert space.pods is not None and space.pods.per_item() == {"mini-hooks-001": 2}  # one pod per attempt


def test_a_pod_that_cannot_be_scheduled_says_why_and_ends_as_infra_error(
    space: Space, mini_suite: Path, tmp_path: Path
) -> None:
    space.install_controller("controller.startSeconds=30")
    grader = GraderSpec(timeout_seconds=30, limits=GraderLimits(cpus=64))  # more than any node has
    name = _submit(space, mini_suite, "huge", grader, retries=0, test_id="mini-hooks-001")

    def message() -> str:
        text = str((space.run_object(name).get("status") or {}).get("message") or "")
        return text if "not running yet" in text else ""

    waiting = space.wait_for(message, 120, "the run to say why its grader waits")
    assert "Unschedulable" in waiting and "cpu" in waiting, waiting
    run = space.wait_phase(name, 300)
    assert run["status"]["infraErrors"] == 1, run["status"]
    space.cli("results", name, "-o", str(tmp_path / "r.jsonl"))
    (record,) = records(tmp_path / "r.jsonl")
    assert record["grader"]["status"] == "infra_error" and "Insufficient cpu" in record["error"], record["error"]


def test_in_flight_bound_and_api_writes_per_item_as_the_api_server_saw_them(
    space: Space, mini_suite: Path, tmp_path: Path
) -> None:
    """Writes counted from the API server's side: its watch events on the run's objects, one per write that
    changed something (Job status changes are the Job controller's, not counted). The run's Jobs never
    exceed its in-flight bound, and every object stored validates strictly against Kubernetes 1.37."""
    items = 3
    suite = clusterkit.clone_suite(mini_suite, tmp_path / "suite", items)
    space.install_controller()
    seen = clusterkit.ObjectEvents(space.cluster, space.namespace)
    try:
        name = space.cli("submit", "--check-reference-solution", "--dataset-path", str(suite), "--max-in-flight", "2"
                         ).stdout.strip()  # fmt: skip
        run = space.wait_phase(name, 900)
        space.wait_for(lambda: len(seen.of("jobs", "DELETED")) == items, 300, "the collected Jobs to be deleted")
    finally:
        seen.stop()
    assert not seen.failure, seen.failure
    assert (run["status"]["phase"], run["status"]["passed"]) == ("Succeeded", items), run["status"]
    live: set[str] = set()
    peak = 0
    for resource, kind, obj in list(seen.events):
        # In flight: created and not finished (a collected Job lingers while its deletion, sent in the
        # background, runs).
        if resource == "jobs":
            gone = kind == "DELETED" or job_finished(obj)
            (live.discard if gone else live.add)(obj["metadata"]["name"])
            peak = max(peak, len(live))
    assert 1 <= peak <= 2, peak
    writes = {
        "run: create + status patches": len(seen.of("wpbenchruns")),
        "configmaps: payload + results": len(seen.of("configmaps")),
        "networkpolicy": len(seen.of("networkpolicies")),
        "job creates": len(seen.of("jobs", "ADDED")),
        "job deletes": len(seen.of("jobs", "DELETED")),
    }
    total = sum(writes.values())
    once = sum(len(seen.of(r, "ADDED")) for r in ("wpbenchruns", "configmaps", "networkpolicies"))
    print(
        f"API writes: {total} for {items} items ({total / items:.2f} per item; {once} objects once per run, "
        f"then {(total - once) / items:.2f} per item): {writes}; peak Jobs in flight {peak}"
    )
    assert writes["job creates"] == writes["job deletes"] == items  # one Job per item: nothing graded twice
    assert writes["networkpolicy"] == 1
    results = [o for o in seen.of("configmaps") if "-results-" in o["metadata"]["name"]]
    assert len(results) <= items + 1, len(results)  # one shard, created once, then one patch per batch at most
    # Status changes only: per item its counters, and a "not running yet" message set and cleared while its
    # pod waits (load-dependent); per run Pending, Running and the end. (The <= 6 writes per test budget
    # is for large runs, where the per-run objects vanish: make bench-k8s, docs/scale.md.)
    assert len(seen.of("wpbenchruns", "MODIFIED")) <= 3 * items + 3, writes
    assert space.pods is not None and set(space.pods.per_item().values()) == {1}
    created = [o for r in ("wpbenchruns", "configmaps", "networkpolicies", "jobs") for o in seen.of(r, "ADDED")]
    assert {o["kind"] for o in created} == {"WPBenchRun", "ConfigMap", "NetworkPolicy", "Job"}
    for obj in created:  # as submit and the controller made them (the server's additions are known fields too)
        clusterkit.validate_object(obj)


def test_a_broken_task_ends_as_harness_error_without_a_retry(space: Space, mini_suite: Path, tmp_path: Path) -> None:
    """A dataset test whose own setup throws: the real grader exits 2 before the candidate runs; that is
    the task's fault (excluded, not retried), never the candidate's."""
    (test,) = json.loads((mini_suite / "execution" / "hooks.json").read_text())
    broken = {**test, "id": "broken-setup-001"}
    broken["runtime_checks"] = {**test["runtime_checks"], "setup": "throw new LogicException( 'fixture broke' );"}
    (tmp_path / "suite" / "execution").mkdir(parents=True)
    (tmp_path / "suite" / "execution" / "broken.json").write_text(json.dumps([broken]))
    space.install_controller()
    name = space.cli("submit", "--check-reference-solution", "--dataset-path", str(tmp_path / "suite")).stdout.strip()
    run = space.wait_phase(name, 600)
    assert (run["status"]["errors"], run["status"]["infraRetries"], run["status"]["passed"]) == (1, 0, 0), run["status"]
    space.cli("results", name, "-o", str(tmp_path / "r.jsonl"))
    (rec,) = records(tmp_path / "r.jsonl")
    assert rec["grader"]["status"] == "harness_error" and rec["error"].startswith("harness_error"), rec
    assert "fixture broke" in json.dumps(rec["grader"]), rec["grader"]
    assert space.pods is not None and space.pods.per_item() == {"broken-setup-001": 1}


def test_status_watch_follows_a_run_to_its_end(space: Space, mini_suite: Path) -> None:
    # Through the one watch loop (kube.client.Watcher); its relist after a real 410 is tested in
    # test_api_cluster.py, and through `status --watch` in test_cluster_path.py's helm upgrade test.
    space.install_controller()
    name = space.cli("submit", "--check-reference-solution", "--dataset-path", str(mini_suite),
                     "--test-id", "mini-hooks-001").stdout.strip()  # fmt: skip
    res = space.cli("status", name, "--watch", timeout=300)
    assert "Succeeded" in res.stdout and "1/1 done" in res.stdout


def test_dry_run_output_cannot_be_applied(space: Space, mini_suite: Path, tmp_path: Path) -> None:
    out = space.cli("submit", "--check-reference-solution", "--dataset-path", str(mini_suite), "--dry-run",
                    "--name", "dry", "-n", space.namespace).stdout  # fmt: skip
    path = tmp_path / "run.yaml"
    path.write_text(out)
    assert yaml.safe_load(out)["kind"] == "WPBenchDryRun"
    res = space.cluster.kubectl("apply", "-n", space.namespace, "-f", str(path), check=False)
    assert res.returncode != 0 and "WPBenchDryRun" in res.stderr, res.stderr
    listed = json.loads(space.cluster.kubectl("get", "wpbenchruns,configmaps,jobs", "-n", space.namespace,
                                              "-o", "json").stdout)  # fmt: skip
    assert not [o for o in listed["items"] if o["metadata"]["name"].startswith("dry")]


def test_a_name_lookup_ends_the_same_way_on_both_backends(
    space: Space, grader_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Docker's `--network none` fails a lookup at once; a grader pod resolves with its loopback-only DNS
    config, which fails at once too, so the verdict is the same on both backends. (On a cluster whose
    DNS answers behind a dropping policy, the lookup would outlive this 5 s test; on this machine's
    cluster, which runs no cluster DNS, it also passed with the pod's default DNS policy.)"""
    monkeypatch.setenv("KUBECONFIG", str(space.kubeconfig))
    monkeypatch.setenv("WPBENCH_K8S_NAMESPACE", space.namespace)
    task = GradeTask(test_id="dns-probe", code="$ip = gethostbyname('wordpress.org');", timeout_seconds=5)
    spec = GraderSpec(image=grader_image, timeout_seconds=5)
    statuses = {}
    for backend in ("docker", "kubernetes"):
        executor = get_executor(backend, spec, f"dns-{backend}")
        executor.preflight()
        if backend == "kubernetes":  # `run --executor kubernetes` graded with network before
            policies = space.objects("networkpolicies")
            assert [p["spec"]["policyTypes"] for p in policies] == [["Ingress", "Egress"]], policies
        try:
            decision = decide_outcome(executor.run_grader(task))
        finally:
            executor.cleanup()
        assert not isinstance(decision, Infra), (backend, decision)
        statuses[backend] = decision.verdict.status
    assert statuses["kubernetes"] == statuses["docker"] != "timeout", statuses
