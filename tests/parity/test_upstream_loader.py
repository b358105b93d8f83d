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


OURS_IN_UPSTREAM_LAYOUT = {
    "id": "e-ours-001",
    "category": "shortcodes",
    "prompt": "p",
    "reference_solution": "add_shortcode( 'wpo_hi', function () { return 'hi there'; } );\nfunction wpo_two() { return 2; }",
    "exploit_solutions": ["add_shortcode( 'wpo_hi', '__return_empty_string' );"],
    "runtime_checks": {
        "assertions": [
            # Our parameter names, no `target`: our semantics, not upstream's with an empty target.
            {"type": "output_equals", "shortcode_content": "[wpo_hi]", "expected": "hi there"},
            {"type": "returns_value", "function": "wpo_two", "expected": 2},
            {"type": "shortcode_exists", "shortcode": "wpo_hi"},
        ]
    },
}


def test_our_parameter_names_keep_our_meaning_in_an_upstream_layout_suite() -> None:
    from wpbench_k8s.dataset import ExecutionTest
    from wpbench_k8s.upstream_compat import runtime_checks

    test = ExecutionTest.model_validate(OURS_IN_UPSTREAM_LAYOUT)
    rewritten = runtime_checks(test.runtime_checks).assertions
    assert [a.type for a in rewritten] == ["output_equals", "returns_value", "shortcode_exists"]
    assert rewritten == test.runtime_checks.assertions
    # With `target` it is upstream's check.
    upstream = test.runtime_checks.model_copy(
        update={"assertions": [test.runtime_checks.assertions[2].model_copy(update={"target": "wpo_hi"})]}
    )
    assert [a.type for a in runtime_checks(upstream).assertions] == ["custom_assertion"]


@pytest.mark.docker
def test_reference_and_exploit_strings_run_in_an_upstream_layout_suite(grader_image: str, tmp_path: Path) -> None:
    import subprocess
    import sys

    suite = write_suite(tmp_path / "s", [OURS_IN_UPSTREAM_LAYOUT], [])
    for mode, code in (("--check-reference-solution", 0), ("--check-exploits", 0)):
        out = tmp_path / mode.strip("-")
        done = subprocess.run(
            [sys.executable, "-m", "wpbench_k8s", "run", "--dataset-path", str(suite), mode, "--image", grader_image,
             "--no-cache", "--output", str(out / "r.json")],
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        assert done.returncode == code, done.stdout + done.stderr
        (jsonl,) = out.glob("*.jsonl")
        records = [json.loads(line) for line in jsonl.read_text().splitlines()]
        assert {r["profile"] for r in records} == {"upstream"}  # execution only: scoring v3.0
        if mode == "--check-exploits":
            authored = [r for r in records if "authored" in r["item_id"]]
            assert len(authored) == 1 and authored[0]["scores"]["execution_pass"] is False


PLUGIN_FIRST = {
    "id": "e-plugin-first-001",
    "category": "plugin-lifecycle",
    "prompt": "p",
    "artifact_kind": "wp_plugin_files",
    "reference_files": {"wpo.php": "<?php\n/**\n * Plugin Name: WPO\n */\nfunction wpo_loaded() { return 'yes'; }\n"},
    "exploit_solutions": ["function wpo_loaded() { return 'yes'; }"],
    "runtime_checks": {
        # Upstream loads the plugin before setup, so setup sees it (and its directory name).
        "setup": "$GLOBALS['wpo_seen'] = function_exists( 'wpo_loaded' ) ? wpo_loaded() : 'no';",
        "assertions": [
            {"type": "custom_assertion", "code": "return 'yes' === $GLOBALS['wpo_seen'];"},
            {
                "type": "custom_assertion",
                "code": "return (bool) glob( WP_PLUGIN_DIR . '/wp-bench-candidate-*/wpo.php' );",
            },
        ],
    },
}


@pytest.mark.docker
def test_a_plugin_is_loaded_before_setup_under_upstream_only(grader_image: str, tmp_path: Path) -> None:
    import subprocess
    import sys

    suite = write_suite(tmp_path / "s", [PLUGIN_FIRST], [])
    results = {}
    for profile in ("upstream", "wpbench"):
        out = tmp_path / profile
        done = subprocess.run(
            [sys.executable, "-m", "wpbench_k8s", "run", "--dataset-path", str(suite), "--check-reference-solution",
             "--profile", profile, "--image", grader_image, "--no-cache", "--output", str(out / "r.json")],
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        (jsonl,) = out.glob("*.jsonl")
        (record,) = [json.loads(line) for line in jsonl.read_text().splitlines()]
        results[profile] = (done.returncode, [a["passed"] for a in record["grader"]["verdict"]["assertions"]])
    assert results == {"upstream": (0, [True, True]), "wpbench": (1, [False, True])}
