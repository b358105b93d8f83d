"""The whole project suite through the real grader: every reference passes, no cheat passes; and fast mode
(`--execution-isolation fork_per_test`) gives every one of those candidates the identical status and reason."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SUITE = REPO / "datasets" / "suites" / "wpk-core-v1"
pytestmark = [pytest.mark.docker, pytest.mark.slow]


def check(mode: str, image: str, out: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    out.mkdir(parents=True, exist_ok=True)
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
            *extra,
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=3600,
    )
    summaries = list(out.glob("results_*.json"))
    assert summaries, res.stderr[-3000:]
    return res, json.loads(summaries[0].read_text())


def verdicts(out: Path) -> dict[str, tuple[str, str]]:
    """Each record's status and reason by item id (the random plugin directory made equal)."""
    (records,) = out.glob("results_*.jsonl")
    rows = [json.loads(line) for line in records.read_text().splitlines() if line.strip()]
    same = re.compile(r"wp-bench-candidate-[0-9a-f]{12}")
    return {
        r["item_id"]: (r["grader"]["status"], same.sub("wp-bench-candidate-*", r["grader"]["reason"] or ""))
        for r in rows
    }


def assert_fast_mode_parity(mode: str, image: str, tmp_path: Path) -> None:
    """The same check in fast mode: every record with the identical status and reason, and marked as such."""
    # graded afresh (the verdict cache keys on the isolation anyway)
    _, summary = check(mode, image, tmp_path / "fast", "--execution-isolation", "fork_per_test", "--no-cache")
    assert summary["metadata"]["runtime_isolation_boundary"] == "process_per_test", summary["metadata"]
    fast, alone = verdicts(tmp_path / "fast"), verdicts(tmp_path / "alone")
    assert fast.keys() == alone.keys()
    differs = {item: (fast[item], alone[item]) for item in fast if fast[item] != alone[item]}
    assert differs == {}, json.dumps(differs, indent=1)[:4000]


def test_every_reference_solution_passes(grader_image, tmp_path):
    res, summary = check("--check-reference-solution", grader_image, tmp_path / "alone")
    assert summary["reference"]["failing"] == {}, json.dumps(summary["reference"]["failing"], indent=1)[:4000]
    assert res.returncode == 0
    assert summary["reference"]["tests_checked"] >= 80
    # every alternative solution was graded beside its reference (datasets/README.md)
    assert summary["reference"]["solutions_checked"] >= summary["reference"]["tests_checked"] + 17
    assert summary["metadata"]["runtime_isolation_boundary"] == "container_per_test"
    assert_fast_mode_parity("--check-reference-solution", grader_image, tmp_path)


# Every execution test meets ~10 candidates (empty, trivial stubs, two grader attacks, two universal answers,
# evasions of its forbidden patterns, authored cheats): over a thousand containers with the knowledge baselines
# (17 min at concurrency 2 on a busy host), past the suite-wide 600 s; then the same candidates in fast mode.
@pytest.mark.timeout(2700)
def test_no_test_can_be_cheated(grader_image, tmp_path):
    res, summary = check("--check-exploits", grader_image, tmp_path / "alone")
    assert summary["exploits"]["exploitable"] == {}, summary["exploits"]["exploitable"]
    assert res.returncode == 0
    assert_fast_mode_parity("--check-exploits", grader_image, tmp_path)
