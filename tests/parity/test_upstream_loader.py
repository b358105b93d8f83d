"""Upstream-format suites that upstream WP-Bench loads and scores, loaded here unchanged.

Expected scores were computed by running upstream's own `score_knowledge_answer` (WordPress/wp-bench
cd745c0, python/wp_bench/knowledge.py) on the same tests outside this repository.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wpbench_k8s.config import RunConfig
from wpbench_k8s.dataset import KnowledgeTest, load_suite
from wpbench_k8s.errors import InputError
from wpbench_k8s.models.knowledge import score_for_profile
from wpbench_k8s.selection import select_tests

CHOICES = [{"key": "A", "text": "add_action"}, {"key": "B", "text": "add_filter"}]


def write_suite(root: Path, execution: list[dict], knowledge: list[dict]) -> Path:
    for kind, tests in (("execution", execution), ("knowledge", knowledge)):
        (root / kind).mkdir(parents=True, exist_ok=True)
        doc = {"id": f"wp-core-{kind}-v1-x", "version": "1.0.0", "tests": tests}
        (root / kind / "x.json").write_text(json.dumps(doc))
    return root


def upstream_suite(tmp_path: Path) -> Path:
    execution = [
        # No difficulty (upstream dropped the field), exploit_solutions as bare PHP strings, a test_function.
        {"id": "e-cron-001", "category": "cron", "prompt": "p", "reference_solution": "function f() {}",
         "test_function": "f(): void", "exploit_solutions": ["function f() { return 1; }", "// nothing"]},
        {"id": "e-hooks-001", "category": "hooks", "difficulty": "advanced", "prompt": "p"},
    ]  # fmt: skip
    knowledge = [
        {"id": "k-mc-001", "category": "hooks", "difficulty": "advanced", "type": "multiple_choice",
         "prompt": "p", "choices": CHOICES, "correct_answer": "b"},
        {"id": "k-sa-001", "category": "hooks", "type": "short_answer", "prompt": "p",
         "correct_answer": "wp_enqueue_script", "answer_type": "Contains"},
    ]  # fmt: skip
    return write_suite(tmp_path / "s", execution, knowledge)


def test_the_spellings_upstream_accepts_load(tmp_path: Path) -> None:
    suite = load_suite(upstream_suite(tmp_path))
    assert suite.format == "upstream"
    tests = suite.by_id()
    assert [e.code for e in tests["e-cron-001"].exploit_solutions] == ["function f() { return 1; }", "// nothing"]  # type: ignore[union-attr]
    assert tests["e-hooks-001"].difficulty == "advanced" and tests["k-mc-001"].difficulty == "advanced"
    assert tests["k-mc-001"].correct_answer == "B"  # type: ignore[union-attr]
    assert tests["k-sa-001"].answer_type == "contains"  # type: ignore[union-attr]


# answer -> upstream's score (score_knowledge_answer at cd745c0)
UPSTREAM_SCORES = {
    "k-mc-001": {"B": 1.0, "b": 1.0, "The answer is B.": 1.0, "A": 0.0, "use add_filter here": 1.0},
    "k-sa-001": {"wp_enqueue_script": 1.0, "Call wp_enqueue_script() on wp_enqueue_scripts.": 1.0,
                 "wp_register_script": 0.0},
}  # fmt: skip


@pytest.mark.parametrize(("test_id", "answer"), [(t, a) for t, answers in UPSTREAM_SCORES.items() for a in answers])
def test_they_score_as_upstream_scores_them(tmp_path: Path, test_id: str, answer: str) -> None:
    test = load_suite(upstream_suite(tmp_path)).by_id()[test_id]
    assert isinstance(test, KnowledgeTest)
    assert score_for_profile(test, answer, "upstream").score == UPSTREAM_SCORES[test_id][answer]


def test_a_category_one_test_type_lacks_is_refused_as_upstream_refuses_it(tmp_path: Path) -> None:
    suite = load_suite(upstream_suite(tmp_path))
    with pytest.raises(InputError, match="unknown category cron among the knowledge tests"):
        select_tests(suite, RunConfig(categories=["cron"]), profile="upstream")
    # One test type selected, or a category both types have: it runs.
    assert [
        t.id for t in select_tests(suite, RunConfig(categories=["cron"], test_type="execution"), profile="upstream")
    ] == ["e-cron-001"]
    assert len(select_tests(suite, RunConfig(categories=["hooks"]), profile="upstream")) == 3
    # Ours filters the pooled tests.
    assert [t.id for t in select_tests(suite, RunConfig(categories=["cron"]), profile="wpbench")] == ["e-cron-001"]
