"""Helpers for the fault tests: a generated suite of slow-enough tests, the CLI, and record comparison."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def make_suite(root: Path, count: int, sleep_ms: int = 1200, *, name: str = "faults") -> Path:
    """A suite of `count` passing tests, each taking about `sleep_ms` inside the grader."""
    suite = root / name
    (suite / "execution").mkdir(parents=True, exist_ok=True)
    tests = [
        {
            "id": f"fault-{n:03d}",
            "category": "timing",
            "difficulty": "basic",
            "prompt": "Return the number given, after a pause.",
            "test_function": "fault_echo( int $n ): int",
            "runtime_checks": {
                "assertions": [{"type": "returns_value", "function": "fault_echo", "args": [n], "expected": n}]
            },
            "reference_solution": f"function fault_echo( int $n ): int {{ usleep( {sleep_ms * 1000} ); return $n; }}",
            "metadata": {"source_refs": ["wp-includes/load.php"]},
        }
        for n in range(1, count + 1)
    ]
    (suite / "execution" / "timing.json").write_text(json.dumps(tests, indent=1))
    return suite


def cli_args(suite: Path, out: Path, image: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "wpbench_k8s", "run", "--check-reference-solution", "--dataset-path", str(suite),
            "--output", str(out / "results.json"), "--image", image, *extra]  # fmt: skip


def run(args: list[str], env: dict[str, str] | None = None, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, cwd=REPO, timeout=timeout,
                          env={**os.environ, "COLUMNS": "400", **(env or {})})  # fmt: skip


def wait_for_records(out: Path, count: int, timeout: float = 300) -> Path:
    """The .partial file once it holds at least `count` records."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for partial in out.glob("results_*.jsonl.partial"):
            if len(partial.read_text().splitlines()) >= count:
                return partial
        time.sleep(0.1)
    raise AssertionError(f"fewer than {count} records in {out} after {timeout} s")


def final_records(out: Path) -> list[dict[str, Any]]:
    (jsonl,) = out.glob("results_*.jsonl")
    assert not list(out.glob("*.partial")), "a finished run leaves no .partial"
    (summary,) = out.glob("results_*.json")
    assert summary.stem == jsonl.stem
    return [json.loads(line) for line in jsonl.read_text().splitlines()]


_MS = re.compile(r"\d+ ms")


def comparable(record: dict[str, Any]) -> dict[str, Any]:
    """A record without what differs between two gradings of the same thing: run id, durations, the
    grader's timing lines, the cache flag."""
    doc = json.loads(json.dumps(record))
    doc.pop("run_id", None)
    doc.pop("cached", None)
    grader = doc["grader"]
    grader.pop("duration_ms", None)
    grader.pop("stderr", None)
    verdict = grader.get("verdict") or {}
    verdict.pop("duration_ms", None)
    verdict.pop("stderr", None)
    verdict["phases"] = {k: _MS.sub("N ms", v) for k, v in (verdict.get("phases") or {}).items()}
    return doc


def assert_same_records(got: list[dict[str, Any]], expected: list[dict[str, Any]]) -> None:
    """No verdict lost or duplicated, and each equal to an uninterrupted run's."""
    ids = [r["item_id"] for r in got]
    assert len(ids) == len(set(ids)), f"duplicated records: {ids}"
    assert ids == [r["item_id"] for r in expected], "records lost or out of order"
    for mine, theirs in zip(got, expected, strict=True):
        assert comparable(mine) == comparable(theirs), mine["item_id"]
