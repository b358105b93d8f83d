"""Know-nothing baselines on knowledge tests: statistics, `dataset validate`, `--check-exploits`, completions."""

from __future__ import annotations

import io
import json
import math
import subprocess
from pathlib import Path

import pytest

from wpbench_k8s.cli import run
from wpbench_k8s.dataset import KnowledgeTest, load_suite
from wpbench_k8s.knowledge_baselines import (
    ALPHA,
    baseline_completions,
    key_distribution,
    run_baselines,
    sample_answer,
    upper_tail,
)

REPO = Path(__file__).resolve().parents[2]
SUITE = REPO / "datasets" / "suites" / "wpk-core-v1"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The command line in-process, its outcome shaped like a finished process."""
    out, err = io.StringIO(), io.StringIO()
    code = run(list(args), out, err)
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())


def mc(test_id: str, key: str, texts: tuple[str, ...] = ("init", "plugins_loaded", "wp_head", "admin_init")) -> dict:
    return {
        "id": test_id, "category": "hooks", "type": "multiple_choice", "prompt": f"Question {test_id}?",
        "choices": [{"key": k, "text": t} for k, t in zip("ABCD", texts, strict=True)], "correct_answer": key,
    }  # fmt: skip


def biased_suite(root: Path) -> Path:
    """Twenty questions keyed B, whose key is also the longest option: what issue 15 found."""
    folder = root / "biased"
    (folder / "knowledge").mkdir(parents=True)
    tests = [mc(f"b-{i:03d}", "B", ("x", "the right, long and detailed answer", "y", "z")) for i in range(20)]
    (folder / "knowledge" / "k.json").write_text(json.dumps(tests))
    return folder


def test_upper_tail_is_the_binomial_tail_when_chances_are_equal() -> None:
    n, p = 30, 0.25
    for k in (0, 5, 8, 15, 30):
        exact = sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k, n + 1))
        assert upper_tail([p] * n, k) == pytest.approx(exact)
    assert upper_tail([0.0] * 5, 1) == 0.0  # a chance-0 baseline that scores once is infinitely unlikely
    assert upper_tail([0.5, 0.25], 3) == 0.0


def test_position_bias_is_flagged_and_balance_is_not(tmp_path: Path) -> None:
    results = {r.name: r for r in run_baselines(load_suite(biased_suite(tmp_path)).knowledge)}
    assert results["always-B"].flagged and results["always-B"].score == 1.0
    assert results["longest-option"].flagged
    assert not results["always-A"].flagged and not results["shortest-option"].flagged
    balanced = [KnowledgeTest.model_validate(mc(f"k-{i}", "ABCD"[i % 4])) for i in range(20)]
    assert not any(r.flagged for r in run_baselines(balanced))


def test_a_lenient_scorer_lets_hedges_and_all_letters_through() -> None:
    """The hedge and all-letters baselines exist to catch scorer loopholes: show that they do."""
    tests = [KnowledgeTest.model_validate(mc(f"k-{i}", "ABCD"[i % 4])) for i in range(8)]

    def any_letter(test: KnowledgeTest, reply: str) -> float:
        return float(test.correct_answer in reply.removeprefix("Answer:"))

    lenient = {r.name: r for r in run_baselines(tests, score=any_letter)}
    assert lenient["hedge"].flagged and lenient["all-letters"].flagged
    strict = {r.name: r for r in run_baselines(tests)}
    assert strict["hedge"].correct == 0 and strict["all-letters"].correct == 0


def test_the_project_suite_is_balanced_and_near_chance() -> None:
    tests = load_suite(SUITE).knowledge
    keys = key_distribution(tests)
    total = sum(keys.values())
    assert set(keys) == {"A", "B", "C", "D"}
    assert all(0.2 <= n / total <= 0.3 for n in keys.values()), keys
    for result in run_baselines(tests):
        assert not result.flagged, result
        assert result.score <= result.chance_rate + 0.05, result
    # every short answer has a sample answer, so the hedge baseline covers the whole suite
    assert all(sample_answer(t) for t in tests if t.type == "short_answer")


def test_validate_reports_baselines_and_exits_1_on_bias(tmp_path: Path) -> None:
    out = cli("dataset", "validate", str(biased_suite(tmp_path)))
    assert out.returncode == 1, out.stderr
    assert "multiple-choice keys: B 20 (100%)" in out.stdout
    assert "always-B" in out.stdout and "FAR ABOVE CHANCE" in out.stdout
    assert f"p < {ALPHA}" in out.stderr and "always-B (100% against 25%)" in out.stderr
    good = cli("dataset", "validate", str(SUITE))
    assert good.returncode == 0, good.stdout + good.stderr
    assert "baseline hedge" in good.stdout and "FAR ABOVE CHANCE" not in good.stdout


def test_validate_refuses_a_short_answer_whose_sample_does_not_match(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    (folder / "knowledge").mkdir(parents=True)
    test = {"id": "s-1", "category": "c", "type": "short_answer", "prompt": "Which?", "match": "regex",
            "correct_answer": r"\besc_attr\b", "metadata": {"sample_answer": "esc_html"}}  # fmt: skip
    (folder / "knowledge" / "k.json").write_text(json.dumps([test]))
    out = cli("dataset", "validate", str(folder))
    assert out.returncode == 2
    assert "test s-1: its own sample answer 'esc_html' scores 0" in out.stderr


def test_check_exploits_runs_the_baselines_on_knowledge_tests(tmp_path: Path) -> None:
    out = cli("run", "--check-exploits", "--dataset-path", str(biased_suite(tmp_path)),
              "--output", str(tmp_path / "o" / "r.json"))  # fmt: skip
    assert out.returncode == 1, out.stderr[-2000:]
    summary = json.loads(next((tmp_path / "o").glob("r_*.json")).read_text())
    report = summary["exploits"]["knowledge_baselines"]
    assert report["above_chance"] == ["always-B", "longest-option"]
    assert report["baselines"]["always-B"] == {
        "tests": 20, "correct": 20, "score": 1.0, "chance": 0.25, "p_value": float(f"{0.25**20:.3g}"), "flagged": True
    }  # fmt: skip
    assert "far above chance" in out.stderr


def test_check_exploits_on_the_project_knowledge_tests_passes(tmp_path: Path) -> None:
    out = cli("run", "--check-exploits", "--test-type", "knowledge", "--dataset-path", str(SUITE),
              "--output", str(tmp_path / "r.json"))  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    summary = json.loads(next(tmp_path.glob("r_*.json")).read_text())
    assert summary["exploits"]["knowledge_baselines"]["above_chance"] == []


def test_baseline_completions_graded_through_a_run_agree_with_validate(tmp_path: Path) -> None:
    """The same replies through `run --completions` (the path a model's answers take) score the same."""
    tests = load_suite(SUITE).knowledge
    lines = [
        json.dumps({"test_id": test_id, "model": name, "completion": reply})
        for name, replies in baseline_completions(tests).items()
        for test_id, reply in replies.items()
    ]
    (tmp_path / "c.jsonl").write_text("\n".join(lines) + "\n")
    out = cli("run", "--completions", str(tmp_path / "c.jsonl"), "--dataset-path", str(SUITE),
              "--output", str(tmp_path / "r.json"))  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    models = json.loads(next(tmp_path.glob("r_*.json")).read_text())["models"]
    for result in run_baselines(tests):
        assert models[result.name]["knowledge"]["correct"] == result.correct, result.name
        assert models[result.name]["knowledge"]["tests"] == result.tests
