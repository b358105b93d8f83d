"""`make bench` runs end to end (one sample: this checks the tool, not the numbers)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.docker
# The benchmark is a developer tool outside the wheel: `make bench` puts bench/ on the path, and so does this.
BENCH_ENV = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "bench")}


def test_bench_prints_the_ratio(grader_image: str) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "wpbench_gradebench",
            "--image",
            grader_image,
            "--samples",
            "1",
            "--warmup",
            "0",
            "--no-suite",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=BENCH_ENV,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ratio trivial test / bare container" in proc.stdout
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["ratio"] > 0 and summary["boot_median_ms"] > 0


def test_bench_reports_a_missing_image(grader_image: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "wpbench_gradebench", "--image", "wpbench-grader:no-such-tag"],
        capture_output=True,
        text=True,
        env=BENCH_ENV,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2 and "not found" in proc.stdout


def test_the_cpu_of_removed_graders_is_read_from_their_parent_cgroup(grader_image: str) -> None:
    """make bench's grader CPU: containers under a parent cgroup of the bench's own, read after their removal,
    in both isolations (the figure is every grader container's CPU, which no scheduling can avoid)."""
    import secrets

    from wpbench_gradebench.__main__ import TRIVIAL_TASK, cgroup_cpu_seconds, remove_cgroup
    from wpbench_k8s.executor.docker import DockerExecutor
    from wpbench_k8s.manifest import GraderSpec
    from wpbench_k8s.outcome import Scored, decide_outcome

    for isolation in ("reset_per_test", "fork_per_test"):
        executor = DockerExecutor(GraderSpec(image=grader_image, execution_isolation=isolation), "bench-test")  # type: ignore[arg-type]
        executor.cgroup_parent = f"/wpbench-bench-test-{secrets.token_hex(4)}"
        executor.preflight()
        try:
            for _ in range(2):
                decision = decide_outcome(executor.run_grader(TRIVIAL_TASK))
                assert isinstance(decision, Scored) and decision.verdict.status == "passed", decision
        finally:
            executor.cleanup()
        cpu = cgroup_cpu_seconds(executor.cgroup_parent)
        remove_cgroup(executor.cgroup_parent)
        if cpu is None:
            pytest.skip("no cgroup hierarchy readable here (cgroup v1 cpuacct or v2 cpu.stat)")
        assert cpu > 0.05, (isolation, cpu)  # two gradings: at least one WordPress boot (fast mode forks from one)
        assert cgroup_cpu_seconds(executor.cgroup_parent) is None  # and the bench's cgroup is gone again
