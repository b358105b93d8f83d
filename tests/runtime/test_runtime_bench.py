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
