"""The fake provider's two models and the helpers the model-run tests share."""

from __future__ import annotations

import json
import re
import sys
import threading
from pathlib import Path
from typing import Any

from wpbench_k8s.dataset import ExecutionTest, KnowledgeTest, load_suite
from wpbench_k8s.models.prompts import build_prompt

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "models"))
from fake_provider import FakeProvider, Reply, has_system, rate_limited, user_text  # noqa: E402

MINI = REPO / "tests" / "fixtures" / "suites" / "mini"
SUITE = load_suite(MINI)
BY_PROMPT = {build_prompt(t): t for t in SUITE.all_tests()}
# --limit 3 of the mini suite: two execution tests and one knowledge test.
SELECTION = ("--dataset-path", str(MINI), "--limit", "3")
EXPECTED_TESTS = ["mini-hooks-001", "mini-shortcodes-001", "mini-k-002"]
RATE_LIMITED = "mini-hooks-001"  # model a's first two calls for this test (baseline) get 429s
PROVIDER_VARS = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE", "ANTHROPIC_API_KEY", "GEMINI_API_KEY",
                 "GOOGLE_API_KEY")  # fmt: skip
FAST_RETRIES = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "WPBENCH_MODEL_RETRY_INITIAL_SECONDS": "0.01",
    "WPBENCH_MODEL_RETRY_JITTER_SECONDS": "0",
    "WPBENCH_MODEL_RETRY_MAX_SECONDS": "0.05",
}


def good_answer(test: Any) -> str:
    if isinstance(test, ExecutionTest):
        return f"Here is the code:\n\n```php\n<?php\n{test.reference_solution}\n```\n\nIt uses the WordPress API."
    assert isinstance(test, KnowledgeTest)
    return f"The answer is {test.correct_answer}." if test.type == "multiple_choice" else test.correct_answer


def bad_answer(test: Any) -> str:
    if isinstance(test, ExecutionTest):
        return "```php\nfunction wpbp_nothing() {}\n```"
    return "A" if test.type == "multiple_choice" else "esc_html"


class Models:
    """openai/a answers right, but its first two calls for RATE_LIMITED (baseline) are 429s; openai/b
    answers right only with the skill. Per prompt, not per call order, so a local run (concurrent) and
    the controller (in manifest order) see the 429s on the same item."""

    def __init__(self, provider: FakeProvider) -> None:
        self.provider = provider
        self.lock = threading.Lock()
        self.limited = 0
        provider.respond("a", self.a)
        provider.respond("b", self.b)

    def reset(self) -> None:
        with self.lock:
            self.limited = 2
            self.provider.requests.clear()
            self.provider.statuses.clear()

    def a(self, body: dict[str, Any]) -> Reply:
        test = BY_PROMPT[user_text(body)]
        if test.id == RATE_LIMITED and not has_system(body):
            with self.lock:
                if self.limited > 0:
                    self.limited -= 1
                    return rate_limited()
        return Reply(content=good_answer(test), prompt_tokens=300, completion_tokens=80)

    def b(self, body: dict[str, Any]) -> Reply:
        test = BY_PROMPT[user_text(body)]
        return Reply(content=good_answer(test) if has_system(body) else bad_answer(test))


def normalise(rec: dict[str, Any]) -> dict[str, Any]:
    """A record minus what differs between any two runs: run id, durations (also inside phase notes)."""
    rec = json.loads(json.dumps(rec))
    rec.pop("run_id")
    # The cluster's word on the suite (the controller's recomputed digest, a cluster admin's pin); a local
    # record has neither. Their values are tested in test_tenancy_cluster.py. Nor the image id the cluster
    # pinned its graders to (tested in test_observability_cluster.py).
    rec.pop("suite_digest", None)
    rec.pop("suite_verified", None)
    rec.pop("grader_image_id", None)
    rec["grader"]["duration_ms"] = 0
    if rec["grader"].get("verdict"):
        verdict = rec["grader"]["verdict"]
        verdict["duration_ms"] = 0
        verdict["phases"] = {k: re.sub(r" \(\d+ ms\)", "", v) for k, v in verdict["phases"].items()}
    rec["usage"]["latency_ms"] = 0
    return rec


def model_env(provider: FakeProvider, *, for_pods: bool = False) -> dict[str, str]:
    """What a local run gets, or (`for_pods`) what the controller gets from the chart's API-key Secret: the
    provider's address its pods reach. Plus fast retries for the tests."""
    url = (provider.pod_url or provider.url) if for_pods else provider.url
    return {**FAST_RETRIES, "OPENAI_API_BASE": url, "OPENAI_API_KEY": "sk-fake-secret-key"}


def summary_sections(summary: dict[str, Any]) -> dict[str, Any]:
    """The comparison and Skill Impact sections without what differs between any two runs (latency)."""
    out = json.loads(json.dumps({k: summary[k] for k in ("comparison", "skill_impact")}))
    for row in out["comparison"]["rows"]:
        row["latency_ms_mean"] = None
    for delta in out["comparison"]["skills_delta"]:
        delta["latency_ms_mean"] = None
    return out


def comparable(record: dict[str, Any]) -> dict[str, Any]:
    rec = normalise(record)
    rec["usage"]["cost_usd"] = 0.0
    return rec
