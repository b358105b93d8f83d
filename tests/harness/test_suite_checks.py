"""The whole project suite through the real grader: every reference passes, no cheat passes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SUITE = REPO / "datasets" / "suites" / "wpk-core-v1"
pytestmark = [pytest.mark.docker, pytest.mark.slow]


def check(mode: str, image: str, out: Path) -> tuple[subprocess.CompletedProcess[str], dict]:
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "wpbench_k8s",
            "run",
            mode,
            "--dataset-path",
            str(SUITE),
            "--execution-concurrency",
            "2",
            "--output",
            str(out / "results.json"),
            "--image",
            image,
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=3600,
    )
    summaries = list(out.glob("results_*.json"))
    assert summaries, res.stderr[-3000:]
    return res, json.loads(summaries[0].read_text())


def test_every_reference_solution_passes(grader_image, tmp_path):
    res, summary = check("--check-reference-solution", grader_image, tmp_path)
    assert summary["reference"]["failing"] == {}, json.dumps(summary["reference"]["failing"], indent=1)[:4000]
    assert res.returncode == 0
    assert summary["reference"]["tests_checked"] >= 80
    # every alternative solution was graded beside its reference (datasets/README.md)
    assert summary["reference"]["solutions_checked"] >= summary["reference"]["tests_checked"] + 17


# Every execution test meets ~10 candidates (empty, trivial stubs, two grader attacks, two universal answers,
# evasions of its forbidden patterns, authored cheats): over a thousand containers with the knowledge baselines
# (17 min at concurrency 2 on a busy host), past the suite-wide 600 s.
@pytest.mark.timeout(1800)
def test_no_test_can_be_cheated(grader_image, tmp_path):
    res, summary = check("--check-exploits", grader_image, tmp_path)
    assert summary["exploits"]["exploitable"] == {}, summary["exploits"]["exploitable"]
    assert res.returncode == 0
