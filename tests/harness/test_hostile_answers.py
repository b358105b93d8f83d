"""Hostile answers on the real grader: one answer holding a lone UTF-16 surrogate costs that answer alone
(its scored failure); the run finishes, writes its summary, and every file it writes is valid UTF-8 JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from wpbench_k8s.textsafe import lone_surrogate

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.docker


def assert_valid_utf8_json(folder: Path) -> int:
    """Every file the run wrote parses as strict UTF-8 JSON (or JSONL) holding no lone surrogate."""
    checked = 0
    for path in sorted(folder.iterdir()):
        text = path.read_bytes().decode("utf-8")  # strict: raises on anything not UTF-8
        docs = [json.loads(x) for x in text.splitlines()] if ".jsonl" in path.name else [json.loads(text)]
        assert all(lone_surrogate(d) is None for d in docs), path
        checked += 1
    return checked


def test_a_surrogate_bearing_completion_is_its_own_scored_failure(grader_image, mini_suite, tmp_path):
    good = json.loads((mini_suite / "execution" / "shortcodes.json").read_text())["tests"][0]["reference_solution"]
    hostile = "add_filter( 'the_title', function ( $t ) { return $t . ' [checked]'; } ); // \ud83d"
    completions = tmp_path / "c.jsonl"
    completions.write_text(
        json.dumps({"test_id": "mini-hooks-001", "model": "m", "code": hostile}) + "\n"
        + json.dumps({"test_id": "mini-shortcodes-001", "model": "m", "code": good}) + "\n"
    )  # fmt: skip
    assert "\\ud83d" in completions.read_text()  # the escape json allows, as a JSONL file would carry it
    out = tmp_path / "out"
    res = subprocess.run(
        [sys.executable, "-m", "wpbench_k8s", "run", "--completions", str(completions), "--dataset-path",
         str(mini_suite), "--image", grader_image, "--output", str(out / "results.json")],
        capture_output=True, text=True, cwd=REPO, timeout=600,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    assert "Traceback" not in res.stderr
    assert assert_valid_utf8_json(out) == 3  # summary, records, manifest
    (jsonl,) = out.glob("results_*.jsonl")
    records = {r["test_id"]: r for r in map(json.loads, jsonl.read_text().splitlines())}
    hooks = records["mini-hooks-001"]
    assert hooks["error"] is None  # scored, not excluded
    assert hooks["grader"]["status"] == "failed" and hooks["scores"]["execution_pass"] is False
    assert "lone UTF-16 surrogate" in hooks["grader"]["reason"]
    assert hooks["output"]["code"].endswith("// \ufffd")
    other = records["mini-shortcodes-001"]
    assert other["grader"]["status"] == "passed", other["grader"]  # the real grader graded the other answer
    assert other["grader"]["verdict"] is not None
    (summary,) = out.glob("results_*.json")
    assert json.loads(summary.read_text())["overall"]["excluded"] == 0
