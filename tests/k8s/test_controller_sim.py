"""The real CLI and the real controller (separate processes) against the simulated cluster, with pods
that answer instantly: the control plane, restarts and infrastructure faults."""

from __future__ import annotations

import json
import shutil
import subprocess
import time

import pytest
from kubernetes import client as k8s
from kubernetes import config
from simkit import NAMESPACE, clone_suite, records

from wpbench_controller.sim import FakeRunner
from wpbench_k8s.commands.cluster import Cluster, submit
from wpbench_k8s.config import load_config
from wpbench_k8s.manifest import GraderSpec
from wpbench_k8s.pipeline import plan_run


def test_submit_status_results_logs(sim, mini_suite, tmp_path):
    name = sim.cli("submit", "--check-reference-solution", "--dataset-path", str(mini_suite)).stdout.strip()
    assert name.startswith("wpb-")
    assert "Pending" in sim.cli("status", name).stdout  # no controller yet: nothing happens
    sim.start_controller()
    watcher = subprocess.Popen([*sim_cli(sim), "status", name, "--watch"], env=sim.env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    run = sim.wait_phase(name)
    out, _ = watcher.communicate(timeout=60)
    assert watcher.returncode == 0 and "Succeeded" in out and "2/2 done" in out
    st = run["status"]
    assert (st["phase"], st["done"], st["total"], st["passed"], st["progress"], st["score"]) == (
        "Succeeded",
        2,
        2,
        2,
        "2/2",
        1.0,
    )
    res = sim.cli("results", name, "-o", str(tmp_path / "out" / "results.jsonl"), "--report")
    got = records(tmp_path / "out" / "results.jsonl")
    assert [r["test_id"] for r in got] == ["mini-hooks-001", "mini-shortcodes-001"]
    summary = json.loads((tmp_path / "out" / "results.json").read_text())
    # the HTML report beside the summary, from the same code path as `run --report`
    report = tmp_path / "out" / "results.html"
    assert res.stderr.strip().splitlines()[-1] == f"report: {report}"
    assert report.is_file() and "mini-shortcodes-001" in report.read_text()
    assert summary["metadata"]["runtime_isolation_boundary"] == "pod_per_test"
    assert summary["overall"]["execution"]["passed"] == 2
    logs = sim.cli("logs", name, "mini-hooks-001")
    assert '"status": "passed"' in logs.stdout and "kubectl logs -n wpbench -l wpbench-k8s.org/run=" in logs.stderr
    assert sim.cluster.objects("jobs", NAMESPACE) == []  # collected, then deleted
    assert sim.cluster.objects("pods", NAMESPACE) == []  # garbage-collected with their Jobs


def sim_cli(sim) -> list[str]:
    import sys

    return [sys.executable, "-m", "wpbench_k8s"]


def test_unfinished_results_go_to_a_partial_file(sim, mini_suite, tmp_path):
    name = sim.cli("submit", "--check-reference-solution", "--dataset-path", str(mini_suite)).stdout.strip()
    res = sim.cli("results", name, "-o", str(tmp_path / "r.jsonl"), "--report")
    assert (tmp_path / "r.jsonl.partial").exists() and not (tmp_path / "r.jsonl").exists()
    assert "0/2 records" in res.stderr and "no report for an unfinished run" in res.stderr
    assert not (tmp_path / "r.html").exists()


def test_in_flight_bound_and_api_writes(sim, mini_suite, tmp_path):
    suite = clone_suite(mini_suite, tmp_path / "suite", 12)
    sim.cluster.kubelet.cpu_capacity = 100  # the node is not the bound here: the run is
    sim.cluster.kubelet.runner = FakeRunner(delay=0.3)
    name = sim.cli(
        "submit", "--check-reference-solution", "--dataset-path", str(suite), "--max-in-flight", "3"
    ).stdout.strip()
    sim.start_controller()
    peak = 0
    end = time.monotonic() + 120
    while time.monotonic() < end and (sim.run_object(name).get("status") or {}).get("phase") != "Succeeded":
        peak = max(peak, len(sim.cluster.objects("jobs", NAMESPACE)))
        time.sleep(0.02)
    assert 1 <= peak <= 3
    writes = sim.cluster.server.writes_by("wpbench-controller") + sim.cluster.server.writes_by("wpbench-k8s")
    assert writes / 12 <= 6, sim.cluster.server.writes


def _done(sim, name: str) -> int:
    return int((sim.run_object(name).get("status") or {}).get("done", 0))


def test_controller_killed_and_restarted_mid_run(sim, mini_suite, tmp_path):
    suite = clone_suite(mini_suite, tmp_path / "suite", 16)
    sim.cluster.kubelet.runner = FakeRunner(delay=0.4)
    name = sim.cli(
        "submit", "--check-reference-solution", "--dataset-path", str(suite), "--max-in-flight", "2"
    ).stdout.strip()
    for _ in range(3):  # kill -9 three times while Jobs are in flight
        proc = sim.start_controller()
        done_before = _done(sim, name)
        sim.wait_for(lambda before=done_before: _done(sim, name) >= before + 3, 60, "progress")
        proc.kill()
        proc.wait()
        time.sleep(0.5)  # pods keep finishing while no controller runs
    sim.start_controller()
    run = sim.wait_phase(name)
    assert run["status"]["phase"] == "Succeeded" and run["status"]["done"] == 16
    sim.cli("results", name, "-o", str(tmp_path / "r.jsonl"))
    got = records(tmp_path / "r.jsonl")
    ids = [r["item_id"] for r in got]
    assert sorted(ids) == sorted(set(ids)) and len(ids) == 16  # none lost, none duplicated
    assert all(r["grader"]["status"] == "passed" for r in got)
    assert set(sim.pods_created().values()) == {1}  # and nothing was graded twice


def test_evicted_pod_is_retried_as_infra_then_succeeds(sim, mini_suite, tmp_path):
    sim.cluster.kubelet.runner = FakeRunner(delay=3.0)
    name = sim.cli("submit", "--check-reference-solution", "--dataset-path", str(mini_suite),
                   "--test-id", "mini-hooks-001").stdout.strip()  # fmt: skip
    sim.start_controller()
    core = k8s.CoreV1Api(config.new_client_from_config(str(sim.kubeconfig)))
    pod = sim.wait_for(lambda: [p for p in sim.cluster.objects("pods", NAMESPACE) if p["status"].get("phase") == "Running"],
                       30, "a running grader pod")[0]  # fmt: skip
    core.create_namespaced_pod_eviction(pod["metadata"]["name"], NAMESPACE,
                                        {"metadata": {"name": pod["metadata"]["name"], "namespace": NAMESPACE}})  # fmt: skip
    run = sim.wait_phase(name, 60)
    assert run["status"]["infraRetries"] == 1 and run["status"]["passed"] == 1 and run["status"]["infraErrors"] == 0
    sim.cli("results", name, "-o", str(tmp_path / "r.jsonl"))
    (rec,) = records(tmp_path / "r.jsonl")
    assert rec["grader"]["status"] == "passed" and rec["grader"]["infra_retries"] == 1 and rec["error"] is None


def _submit_lib(sim, suite, name: str, *, timeout: float, grace: float, retries: int, test_ids: list[str]) -> str:
    from wpbench_k8s.kube.objects import RunSettings

    config_ = load_config(None, {"dataset.path": str(suite), "run.test_ids": test_ids})
    manifest = plan_run(config_, "reference", grader=GraderSpec(timeout_seconds=timeout, grace_seconds=grace))
    cluster = Cluster(str(sim.kubeconfig), None, NAMESPACE)
    return submit(cluster, manifest, RunSettings(name=name, namespace=NAMESPACE, infra_retries=retries))


def test_pod_that_never_reports_is_retried_then_scored_as_the_candidates_timeout(sim, mini_suite, tmp_path):
    # A hang is something a candidate can cause: retried as infra, then scored as timeout (outcome.py's
    # rule 3, as on the Docker backend), never excluded.
    sim.cluster.kubelet.faults["mini-hooks-001"] = ["hang", "hang"]
    name = _submit_lib(
        sim, mini_suite, "hang", timeout=1, grace=1, retries=1, test_ids=["mini-hooks-001", "mini-shortcodes-001"]
    )
    sim.start_controller()
    run = sim.wait_phase(name, 60)
    st = run["status"]
    assert (st["done"], st["passed"], st["failed"], st["infraErrors"], st["infraRetries"]) == (2, 1, 1, 0, 1)
    sim.cli("results", name, "-o", str(tmp_path / "r.jsonl"))
    hung = next(r for r in records(tmp_path / "r.jsonl") if r["test_id"] == "mini-hooks-001")
    g = hung["grader"]
    assert (g["status"], g["infra_retries"]) == ("timeout", 1)
    assert "deadline" in g["verdict"]["reason"]
    summary = json.loads((tmp_path / "r.json").read_text())
    assert summary["overall"]["excluded"] == 0 and summary["overall"]["execution"]["tests"] == 2
    assert sim.pods_created() == {"mini-hooks-001": 2, "mini-shortcodes-001": 1}


def test_harness_error_exit_code_fails_the_job_without_retry(sim, mini_suite, tmp_path):
    sim.cluster.kubelet.faults["mini-hooks-001"] = ["exit2"]
    name = sim.cli("submit", "--check-reference-solution", "--dataset-path", str(mini_suite),
                   "--test-id", "mini-hooks-001").stdout.strip()  # fmt: skip
    sim.start_controller()
    run = sim.wait_phase(name, 60)
    assert run["status"]["errors"] == 1 and run["status"]["infraRetries"] == 0
    sim.cli("results", name, "-o", str(tmp_path / "r.jsonl"))
    (rec,) = records(tmp_path / "r.jsonl")
    assert rec["grader"]["status"] == "harness_error" and rec["error"].startswith("harness_error")
    assert sim.pods_created() == {"mini-hooks-001": 1}


def test_cancel_stops_running_jobs(sim, mini_suite, tmp_path):
    suite = clone_suite(mini_suite, tmp_path / "suite", 8)
    sim.cluster.kubelet.runner = FakeRunner(delay=5.0)
    name = sim.cli("submit", "--check-reference-solution", "--dataset-path", str(suite)).stdout.strip()
    sim.start_controller()
    sim.wait_for(lambda: sim.cluster.objects("jobs", NAMESPACE), 30, "jobs")
    assert "cancel requested" in sim.cli("cancel", name).stdout
    run = sim.wait_phase(name, 30)
    assert run["status"]["phase"] == "Cancelled"
    sim.wait_for(lambda: not sim.cluster.objects("jobs", NAMESPACE), 10, "jobs to go")


def test_deleting_the_run_removes_everything_it_owns(sim, mini_suite):
    name = sim.cli("submit", "--check-reference-solution", "--dataset-path", str(mini_suite)).stdout.strip()
    sim.start_controller()
    sim.wait_phase(name)
    custom = k8s.CustomObjectsApi(config.new_client_from_config(str(sim.kubeconfig)))
    custom.delete_namespaced_custom_object("wpbench-k8s.org", "v1alpha1", NAMESPACE, "wpbenchruns", name)
    for plural in ("configmaps", "networkpolicies", "jobs", "pods"):
        assert sim.cluster.objects(plural, NAMESPACE) == [], plural


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")
def test_kubectl_get_wpbenchruns_shows_phase_progress_score(sim, mini_suite):
    name = sim.cli("submit", "--check-reference-solution", "--dataset-path", str(mini_suite)).stdout.strip()
    sim.start_controller()
    sim.wait_phase(name)
    out = subprocess.run(["kubectl", "--kubeconfig", str(sim.kubeconfig), "get", "wpbenchruns", "-n", NAMESPACE],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert out.returncode == 0, out.stderr
    header, row = out.stdout.splitlines()[:2]
    assert header.split()[:4] == ["NAME", "PHASE", "PROGRESS", "SCORE"]
    assert row.split()[:4] == [name, "Succeeded", "2/2", "1"]


def test_local_run_with_the_kubernetes_executor(sim, mini_suite, tmp_path):
    """`wpbench-k8s run --executor kubernetes`: the same Job builder and verdict reader, one task at a time."""
    import os
    import sys

    env = {**sim.env, "WPBENCH_K8S_NAMESPACE": NAMESPACE}
    res = subprocess.run([sys.executable, "-m", "wpbench_k8s", "run", "--check-reference-solution", "--dataset-path",
                          str(mini_suite), "--executor", "kubernetes", "--output", str(tmp_path / "o" / "results.json")],
                         env=env, capture_output=True, text=True, timeout=300, cwd=os.getcwd())  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    (jsonl,) = (tmp_path / "o").glob("results_*.jsonl")
    assert [r["grader"]["status"] for r in records(jsonl)] == ["passed", "passed"]
    assert sim.cluster.objects("jobs", NAMESPACE) == [] and sim.cluster.objects("configmaps", NAMESPACE) == []


def test_unreachable_cluster_is_a_one_line_error(sim, tmp_path):
    dead = tmp_path / "dead-kubeconfig"
    dead.write_text(json.dumps({"apiVersion": "v1", "kind": "Config", "current-context": "x",
                                "clusters": [{"name": "x", "cluster": {"server": "http://127.0.0.1:9"}}],
                                "users": [{"name": "x", "user": {}}],
                                "contexts": [{"name": "x", "context": {"cluster": "x", "user": "x"}}]}))  # fmt: skip
    res = sim.cli("status", "some-run", "--kubeconfig", str(dead), check=False)
    assert (
        res.returncode == 3 and "cannot reach the Kubernetes API server" in res.stderr and "Traceback" not in res.stderr
    )
    res = sim.cli("status", "no-such-run", check=False)
    assert res.returncode == 3 and "not found" in res.stderr
