"""`wpbench-k8s run` in models mode against the fake provider: two models, a skill A/B, the judge,
429s that cost retries, outages and missing keys that error records without stopping the others.

The first tests run the CLI in-process with a stand-in grader that passes exactly the reference
solution (so they need no Docker); `test_two_model_skill_run_through_the_real_grader` runs the
same command as a user would, through the real grader image.
"""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_provider import FakeProvider, Reply, has_system, rate_limited, server_error, user_text

from wpbench_k8s.cli import run
from wpbench_k8s.dataset import ExecutionTest, KnowledgeTest, load_suite
from wpbench_k8s.executor.base import Executor, register_executor
from wpbench_k8s.manifest import GraderSpec
from wpbench_k8s.models.knowledge import score_answer
from wpbench_k8s.models.prompts import build_prompt
from wpbench_k8s.outcome import GraderFacts
from wpbench_runtime.contract import GradeTask, Scores, Verdict

REPO = Path(__file__).resolve().parents[2]
MINI = REPO / "tests" / "fixtures" / "suites" / "mini"
SUITE = load_suite(MINI)


def _norm(code: str | None) -> str:
    return re.sub(r"\s+", "", code or "")


@register_executor("stub-reference")
class ReferenceStub(Executor):
    """Stands in for the grader: a candidate passes when it is the test's reference solution."""

    def preflight(self) -> GraderSpec:
        return self.spec.model_copy(update={"image_id": "sha256:stub"})

    def run_grader(self, task: GradeTask) -> GraderFacts:
        test = SUITE.by_id()[task.test_id]
        assert isinstance(test, ExecutionTest)
        ok = _norm(task.code) == _norm(test.reference_solution)
        verdict = Verdict(
            test_id=task.test_id,
            status="passed" if ok else "failed",
            scores=Scores(execution_pass=ok, runtime=1.0 if ok else 0.0, static=1.0, static_policy_pass=True),
        )
        return GraderFacts(test_id=task.test_id, exit_code=0, stdout=verdict.model_dump_json())

    def cleanup(self) -> int:
        return 0


def good_answer(test: ExecutionTest | KnowledgeTest) -> str:
    if isinstance(test, ExecutionTest):
        return f"Here is the code:\n\n```php\n<?php\n{test.reference_solution}\n```\n\nIt uses the WordPress API."
    return f"The answer is {test.correct_answer}." if test.type == "multiple_choice" else test.correct_answer


def bad_answer(test: ExecutionTest | KnowledgeTest) -> str:
    if isinstance(test, ExecutionTest):
        return "```php\nfunction wpbp_nothing() {}\n```"
    return "A" if test.type == "multiple_choice" else "esc_html"


BY_PROMPT = {build_prompt(t): t for t in SUITE.all_tests()}


def answer_well(body: dict[str, Any]) -> Reply:
    return Reply(content=good_answer(BY_PROMPT[user_text(body)]), prompt_tokens=300, completion_tokens=80)


def answer_well_only_with_skills(body: dict[str, Any]) -> Reply:
    test = BY_PROMPT[user_text(body)]
    return Reply(content=good_answer(test) if has_system(body) else bad_answer(test))


def judge_reply(body: dict[str, Any]) -> Reply:
    scores = {"security": 8, "performance": 9, "conventions": 7, "readability": 9, "correctness": 10}
    return Reply(content=json.dumps({"scores": scores, "rationale": "Fine."}))


@pytest.fixture
def skill(tmp_path: Path) -> Path:
    path = tmp_path / "wp-skill"
    (path / "references").mkdir(parents=True)
    (path / "SKILL.md").write_text("---\nname: wp-skill\n---\nUse the WordPress APIs.\n")
    (path / "references" / "hooks.md").write_text("plugins_loaded fires after plugins load.\n")
    return path


@pytest.fixture
def restore_sigterm() -> Iterator[None]:
    previous = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, previous)


def run_in_process(*args: str) -> tuple[int, str]:
    err = io.StringIO()
    code = run(["run", "--dataset-path", str(MINI), "--executor", "stub-reference", *args], io.StringIO(), err)
    return code, err.getvalue()


def outputs(out_dir: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    (summary_path,) = out_dir.glob("results_*.json")
    (jsonl_path,) = out_dir.glob("results_*.jsonl")
    return json.loads(summary_path.read_text()), [json.loads(x) for x in jsonl_path.read_text().splitlines()]


def check_two_model_skill_run(summary: dict[str, Any], records: list[dict[str, Any]], provider: FakeProvider) -> None:
    """What a two-model skills run must produce, whichever grader graded it."""
    assert len(records) == 16  # 4 tests x 2 models x 2 variants
    assert all(r["error"] is None for r in records)
    by = {(r["model"], r["variant"], r["test_id"]): r for r in records}
    for test in SUITE.all_tests():
        for variant in ("baseline", "with-skills"):
            assert by[("openai/a", variant, test.id)]["scores"]["execution_pass"] is True
        assert by[("openai/b", "baseline", test.id)]["scores"]["execution_pass"] is False
        assert by[("openai/b", "with-skills", test.id)]["scores"]["execution_pass"] is True
        # The user prompt is byte-identical between variants.
        assert (
            by[("openai/b", "baseline", test.id)]["prompt_hash"]
            == by[("openai/b", "with-skills", test.id)]["prompt_hash"]
        )
    # The two 429s cost two retries on model a, not failures.
    assert sum(r["usage"]["retries"] for r in records if r["model"] == "openai/a") == 2
    assert ("a", 429) in provider.statuses
    assert provider.calls("a") == 8 + 2 and provider.calls("b") == 8
    comparison = summary["comparison"]
    rows = {(row["model"], row["variant"]): row for row in comparison["rows"]}
    assert rows[("openai/a", "baseline")]["score"] == 1.0 and rows[("openai/a", "baseline")]["retries"] == 2
    # The real grader gives partial runtime credit (core already hooks the_title), so b's baseline
    # scores a little above 0; it passes nothing.
    assert rows[("openai/b", "baseline")]["pass_rate"] == 0.0 and rows[("openai/b", "baseline")]["score"] < 0.25
    assert rows[("openai/b", "with-skills")]["pass_rate"] == 1.0
    assert set(rows[("openai/a", "baseline")]["categories"]) == {"hooks", "security", "shortcodes"}
    deltas = {d["model"]: d for d in comparison["skills_delta"]}
    assert deltas["openai/b"]["pass_rate"] == 1.0 and deltas["openai/b"]["score"] > 0.75
    assert deltas["openai/a"]["score"] == 0.0
    impact = {m["model"]: m for m in summary["skill_impact"]["models"]}
    assert impact["openai/b"]["counts"]["fixed"] == 4
    assert {t["change"] for t in impact["openai/b"]["tests"]} == {"fixed"}
    assert impact["openai/a"]["counts"]["still_passing"] == 4 and impact["openai/a"]["tests"] == []
    (meta_skill,) = summary["metadata"]["skills"]
    assert meta_skill["name"] == "wp-skill" and meta_skill["sha256"].startswith("sha256:")


def test_two_model_skill_run_with_judge(
    provider: FakeProvider, skill: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], restore_sigterm: None
) -> None:
    provider.script("a", rate_limited(), rate_limited())
    provider.respond("a", answer_well)
    provider.respond("b", answer_well_only_with_skills)
    provider.respond("judge", judge_reply)
    code, err = run_in_process(
        "--model-name", "openai/a", "--model-name", "openai/b", "--skill", str(skill), "--limit", "4",
        "--judge-model", "openai/judge", "--output", str(tmp_path / "out" / "results.json"),
    )  # fmt: skip
    assert code == 0, err
    summary, records = outputs(tmp_path / "out")
    check_two_model_skill_run(summary, records, provider)
    # The judge scored every execution candidate; knowledge records are not judged.
    judged = [r for r in records if r["judge"] is not None]
    assert len(judged) == 8 and {r["type"] for r in judged} == {"execution"}
    # 0.3*0.8 + 0.2*0.9 + 0.25*0.7 + 0.15*0.9 + 0.1*1.0 = 0.83
    assert all(r["scores"]["quality"] == pytest.approx(0.83) for r in judged)
    assert all(r["scores"]["quality"] is None for r in records if r["type"] == "knowledge")
    rows = {(row["model"], row["variant"]): row for row in summary["comparison"]["rows"]}
    assert rows[("openai/b", "baseline")]["quality"] == pytest.approx(0.83)  # quality is not correctness
    assert rows[("openai/b", "baseline")]["judged"] == 2
    assert "Skill Impact" in err and "Δ skills" in err and "model comparison" in err


def test_outage_and_missing_key_error_their_records_and_the_run_goes_on(
    provider: FakeProvider, tmp_path: Path, capsys: pytest.CaptureFixture[str], restore_sigterm: None
) -> None:
    provider.respond("a", answer_well)
    provider.script("down", server_error(500))
    code, err = run_in_process(
        "--model-name", "openai/down", "--model-name", "anthropic/claude-sonnet-4-20250514",
        "--model-name", "openai/a", "--continue-on-error", "--output", str(tmp_path / "results.json"),
    )  # fmt: skip
    assert code == 0, err
    summary, records = outputs(tmp_path)
    by_model: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by_model.setdefault(r["model"], []).append(r)
    assert all(
        r["error"] and r["error"].startswith("openai/down: provider unavailable") for r in by_model["openai/down"]
    )
    assert all(r["usage"]["calls"] == 6 for r in by_model["openai/down"])  # every attempt made, then given up
    claude = by_model["anthropic/claude-sonnet-4-20250514"]
    assert all("missing API key: set ANTHROPIC_API_KEY" in (r["error"] or "") for r in claude)
    assert all(r["error"] is None and r["scores"]["execution_pass"] for r in by_model["openai/a"])
    rows = {row["model"]: row for row in summary["comparison"]["rows"]}
    assert (rows["openai/down"]["excluded"], rows["openai/down"]["score"]) == (4, None)
    assert (rows["openai/a"]["excluded"], rows["openai/a"]["score"]) == (0, 1.0)
    assert summary["overall"]["excluded"] == 8 and summary["overall"]["score"] == 1.0
    assert "4 excluded record(s): openai/down: provider unavailable" in err
    assert "missing API key" in err


def test_without_continue_on_error_the_first_errored_model_stops_the_run(
    provider: FakeProvider, tmp_path: Path, capsys: pytest.CaptureFixture[str], restore_sigterm: None
) -> None:
    provider.script("down", server_error(503))
    provider.respond("a", answer_well)
    code, err = run_in_process(
        "--model-name", "openai/down", "--model-name", "openai/a", "--output", str(tmp_path / "results.json")
    )
    assert code == 1
    assert "stopped" in err and "openai/down: provider unavailable" in err
    assert provider.calls("a") == 0
    assert list(tmp_path.glob("results_*.jsonl.partial"))


@pytest.mark.docker
def test_two_model_skill_run_through_the_real_grader(
    provider: FakeProvider, skill: Path, tmp_path: Path, grader_image: str
) -> None:
    provider.script("a", rate_limited(), rate_limited())
    provider.respond("a", answer_well)
    provider.respond("b", answer_well_only_with_skills)
    env = {k: v for k, v in os.environ.items()}
    res = subprocess.run(
        [sys.executable, "-m", "wpbench_k8s", "run", "--model-name", "openai/a", "--model-name", "openai/b",
         "--skill", str(skill), "--limit", "4", "--dataset-path", str(MINI), "--image", grader_image,
         "--execution-concurrency", "2", "--output", str(tmp_path / "results.json")],
        capture_output=True, text=True, cwd=REPO, timeout=900, env=env,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-4000:]
    summary, records = outputs(tmp_path)
    check_two_model_skill_run(summary, records, provider)
    for r in records:
        if r["type"] == "execution":
            assert r["grader"]["verdict"] is not None  # graded by the real verifier
    assert "Skill Impact" in res.stderr and "Δ skills" in res.stderr


def test_runs_report_mean_and_standard_deviation(
    provider: FakeProvider, tmp_path: Path, capsys: pytest.CaptureFixture[str], restore_sigterm: None
) -> None:
    calls = {"n": 0}

    def good_then_bad(body: dict[str, Any]) -> Reply:  # run 1 right, run 2 wrong
        calls["n"] += 1
        test = BY_PROMPT[user_text(body)]
        return Reply(content=good_answer(test) if calls["n"] <= 2 else bad_answer(test))

    provider.respond("flaky", good_then_bad)
    code, err = run_in_process(
        "--model-name", "openai/flaky", "--test-type", "execution", "--runs", "2",
        "--output", str(tmp_path / "results.json"),
    )  # fmt: skip
    assert code == 0, err
    summary, records = outputs(tmp_path)
    assert sorted(r["item_id"][-4:] for r in records) == ["--r1", "--r1", "--r2", "--r2"]
    (row,) = summary["comparison"]["rows"]
    assert (row["runs"], row["tests"], row["score"]) == (2, 2, 0.5)
    assert row["score_std"] == pytest.approx(0.7071, abs=1e-4)  # per-run means 1.0 and 0.0
    assert "0.50 ± 0.71" in err


def test_generate_for_item_fills_manifest_items_like_the_local_pipeline(provider: FakeProvider, skill: Path) -> None:
    from wpbench_k8s.config import load_config
    from wpbench_k8s.models.generate import generate_for_item
    from wpbench_k8s.models.skills import load_skill
    from wpbench_k8s.pipeline import plan_run

    provider.respond("b", answer_well_only_with_skills)
    config = load_config(None, {"dataset.path": str(MINI), "models": [{"name": "openai/b"}]})
    manifest = plan_run(config, "models", skills=[load_skill(skill)])
    assert len(manifest.items) == 8
    for item in manifest.items:
        filled, result = generate_for_item(manifest, item)
        assert result.error is None and filled.candidate is not None
        test = SUITE.by_id()[item.test_id]
        body = provider.bodies("b")[-1]
        assert user_text(body) == item.prompt and has_system(body) == (item.variant == "with-skills")
        if isinstance(test, ExecutionTest):
            expected = test.reference_solution if item.variant == "with-skills" else "function wpbp_nothing() {}"
            assert _norm(filled.candidate.code) == _norm(expected)
        else:
            assert isinstance(test, KnowledgeTest) and result.answer is not None
            assert score_answer(test, result.answer) == (1.0 if item.variant == "with-skills" else 0.0)
