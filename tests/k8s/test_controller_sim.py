"""The real CLI and the real controller (separate processes) against the simulated cluster, with pods
that answer instantly: what only the simulation can count or inject (API writes per item, a grader's exit
code 2). Everything else the controller does is tested on the real cluster (test_cluster_path.py)."""

from __future__ import annotations

import time

from simkit import NAMESPACE, clone_suite, records

from wpbench_controller.sim import FakeRunner


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
