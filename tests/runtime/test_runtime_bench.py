"""`make bench` runs end to end (one sample: this checks the tool, not the numbers)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.docker


def test_bench_prints_the_ratio(grader_image: str) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "wpbench_k8s.bench",
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
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ratio trivial test / bare container" in proc.stdout
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["ratio"] > 0 and summary["boot_median_ms"] > 0


def test_bench_reports_a_missing_image(grader_image: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "wpbench_k8s.bench", "--image", "wpbench-grader:no-such-tag"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2 and "not found" in proc.stdout
