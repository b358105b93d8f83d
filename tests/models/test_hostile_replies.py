"""A model reply holding a lone UTF-16 surrogate (JSON's "\\ud83d", which a provider may send) is that
candidate's scored failure: on the real grader, the run goes on, the other answers are graded, and every
file the run writes is valid UTF-8 JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fake_provider import FakeProvider, Reply, user_text

from wpbench_k8s.dataset import ExecutionTest, load_suite
from wpbench_k8s.models.prompts import build_prompt
from wpbench_k8s.textsafe import lone_surrogate

REPO = Path(__file__).resolve().parents[2]
MINI = REPO / "tests" / "fixtures" / "suites" / "mini"
SUITE = load_suite(MINI)
BY_PROMPT = {build_prompt(t): t for t in SUITE.all_tests()}
HOSTILE = {"mini-hooks-001", "mini-k-001"}  # these get the correct answer plus a lone surrogate


def reply(body: dict[str, Any]) -> Reply:
    test = BY_PROMPT[user_text(body)]
    if isinstance(test, ExecutionTest):
        text = f"```php\n<?php\n{test.reference_solution}\n```"
    else:
        text = f"The answer is {test.correct_answer}."
    return Reply(content=text + (" \ud83d" if test.id in HOSTILE else ""))


@pytest.mark.docker
def test_a_model_reply_with_a_lone_surrogate_is_that_candidates_scored_failure(
    provider: FakeProvider, tmp_path: Path, grader_image: str
) -> None:
    provider.respond("a", reply)
    out = tmp_path / "out"
    res = subprocess.run(
        [sys.executable, "-m", "wpbench_k8s", "run", "--model-name", "openai/a", "--dataset-path", str(MINI),
         "--image", grader_image, "--output", str(out / "results.json")],
        capture_output=True, text=True, cwd=REPO, timeout=600, env=dict(os.environ),
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    assert "Traceback" not in res.stderr
    files = sorted(out.iterdir())
    assert len(files) == 3
    for path in files:
        text = path.read_bytes().decode("utf-8")  # strict UTF-8
        docs = [json.loads(x) for x in text.splitlines()] if ".jsonl" in path.name else [json.loads(text)]
        assert all(lone_surrogate(d) is None for d in docs), path
    (jsonl,) = out.glob("results_*.jsonl")
    records = {r["test_id"]: r for r in map(json.loads, jsonl.read_text().splitlines())}
    assert len(records) == 4 and all(r["error"] is None for r in records.values())  # all scored
    for test_id in HOSTILE:
        r = records[test_id]
        assert r["scores"]["correctness"] == 0.0 and r["scores"]["execution_pass"] is False, r
        assert "lone UTF-16 surrogate" in (r["output"]["extraction_error"] or "")
        assert "\ufffd" in r["output"]["raw"]
    assert records["mini-hooks-001"]["grader"]["status"] == "failed"
    assert records["mini-shortcodes-001"]["grader"]["status"] == "passed"  # graded by the real grader
    assert records["mini-k-002"]["scores"]["correctness"] == 1.0
