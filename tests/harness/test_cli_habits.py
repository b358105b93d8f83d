"""Command-line habits on the real grader: outside a terminal a run prints one whole line per record and
no progress bar, names its files by absolute path, and a resumed run keeps the cache setting it started
with; resuming with flags that plan another run names them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.docker


def wpbench(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    env_cmd = [sys.executable, "-m", "wpbench_k8s", *args]
    return subprocess.run(env_cmd, capture_output=True, text=True, cwd=cwd, timeout=600)


def test_a_piped_run_prints_whole_lines_and_a_resume_keeps_no_cache(grader_image, mini_suite, tmp_path):
    res = wpbench("run", "--check-reference-solution", "--dataset-path", str(mini_suite), "--image", grader_image,
                  "--no-cache", "--output", "out/r.json", cwd=tmp_path)  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    lines = res.stderr.splitlines()
    assert "1/2 mini-hooks-001: passed" in lines and "2/2 mini-shortcodes-001: passed" in lines
    assert not any("ETA" in line for line in lines)  # no progress bar outside a terminal
    (jsonl,) = (tmp_path / "out").glob("r_*.jsonl")
    assert f"records: {jsonl}" in lines and jsonl.is_absolute()  # the relative --output, named absolutely
    assert json.loads(jsonl.with_suffix(".jsonl.manifest").read_text())["cache"] == {"enabled": False, "dir": None}
    again = wpbench("run", "--resume", str(jsonl), cwd=tmp_path)  # without --no-cache: the run's own setting
    assert again.returncode == 0, again.stderr[-3000:]
    assert "cache off, resuming: 2 kept, 0 to grade" in again.stderr
    other = wpbench("run", "--resume", str(jsonl), "--limit", "1", "--check-reference-solution", "--dataset-path",
                    str(mini_suite), cwd=tmp_path)  # fmt: skip
    assert other.returncode == 2
    assert "--limit 1" in other.stderr and "1 item(s) against the run's 2" in other.stderr
