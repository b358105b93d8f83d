"""A model run with the upstream execution profile, over real HTTP to the fake provider: what goes
on the wire (temperature 0.0 sent) and what the records and summary say (upstream's names)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

from fake_provider import FakeProvider, Reply, user_text

from wpbench_k8s.cli import run

REPO = Path(__file__).resolve().parents[2]
SUITE = REPO / "tests" / "fixtures" / "suites" / "upstream-mini"
ANSWERS = {  # by a word of the prompt: what the "model" replies
    "finished loading": "```\nC\n```",
    "registers a custom post type": "Use register_post_type() for that.",
    "object cache": "wp_cache_set",
}


def reply(body: dict[str, Any]) -> Reply:
    prompt = user_text(body)
    return Reply(content=next(a for key, a in ANSWERS.items() if key in prompt), prompt_tokens=50, completion_tokens=5)


def test_knowledge_run_sends_temperature_zero_and_records_upstream_names(
    provider: FakeProvider, tmp_path: Path
) -> None:
    provider.respond("a", reply)
    err = io.StringIO()
    code = run(["run", "--dataset-path", str(SUITE), "--model-name", "openai/a", "--test-type", "knowledge",
                "--output", str(tmp_path / "results.json")], io.StringIO(), err)  # fmt: skip
    assert code == 0, err.getvalue()
    assert [b["temperature"] for b in provider.bodies("a")] == [0.0, 0.0, 0.0]
    (summary_path,) = tmp_path.glob("results_*.json")
    (jsonl_path,) = tmp_path.glob("results_*.jsonl")
    summary = json.loads(summary_path.read_text())
    records = {r["test_id"]: r for r in map(json.loads, jsonl_path.read_text().splitlines())}
    assert summary["metadata"]["profile"] == "upstream-v2"
    # Upstream: the fenced letter and the explained short answer score; the wrong function does not.
    assert {t: r["scores"]["knowledge"] for t, r in records.items()} == {"up-k-001": 1.0, "up-k-002": 1.0,
                                                                         "up-k-003": 0.0}  # fmt: skip
    scores = summary["models"]["openai/a"]["scores"]
    assert scores["knowledge"] == 2 / 3 and scores["correctness"] is None  # unrounded, as upstream keeps it
    assert scores["overall"] == 0.6667  # v2.0 on a knowledge-only run: the knowledge mean, rounded
    record = records["up-k-001"]
    assert record["output"]["answer"] == "C" and record["output"]["raw_completion"] == "```\nC\n```"
    assert record["model"] == {"name": "openai/a", "kind": None, "temperature": 0.0, "top_p": None, "max_tokens": None}
    assert re.fullmatch(r"[0-9a-f]{64}", record["prompt_hash"]) and record["usage"]["total_tokens"] == 55
    assert record["error"] is None
