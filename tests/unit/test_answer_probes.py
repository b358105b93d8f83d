"""Short-answer matchers checked against their own probes, and alternative solutions' shape (issue 28)."""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path

import pytest

from wpbench_k8s.cli import run
from wpbench_k8s.dataset import KnowledgeTest, Suite, load_suite
from wpbench_k8s.errors import InputError
from wpbench_k8s.knowledge_baselines import sample_answer
from wpbench_k8s.lint import lint_suite
from wpbench_k8s.models.knowledge import score_answer

REPO = Path(__file__).resolve().parents[2]
SUITE = REPO / "datasets" / "suites" / "wpk-core-v1"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(args), out, err)
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())


def short(test_id: str, pattern: str, match: str = "regex", **metadata: object) -> dict:
    return {"id": test_id, "category": "c", "type": "short_answer", "prompt": "Which?", "match": match,
            "correct_answer": pattern, "metadata": metadata}  # fmt: skip


def suite_with(root: Path, tests: list[dict], upstream: bool = False) -> Path:
    folder = root / "s"
    (folder / "knowledge").mkdir(parents=True)
    doc: object = {"id": "x", "tests": tests} if upstream else tests
    (folder / "knowledge" / "k.json").write_text(json.dumps(doc))
    return folder


def test_every_short_answer_of_the_suite_carries_a_sample_and_both_kinds_of_probe() -> None:
    shorts = [t for t in load_suite(SUITE).knowledge if t.type == "short_answer"]
    assert len(shorts) >= 39
    for t in shorts:
        assert t.metadata.sample_answer and t.metadata.probes, t.id
        assert t.metadata.probes.accept and t.metadata.probes.reject, t.id
        assert all(score_answer(t, p) == 1.0 for p in t.metadata.probes.accept), t.id
        assert all(score_answer(t, p) == 0.0 for p in t.metadata.probes.reject), t.id


def test_the_matchers_issue_28_found_wrong_are_caught_by_their_probes(tmp_path: Path) -> None:
    """The old matchers with the probes the suite now carries: validate names each wrong verdict."""
    too_strict = short("strict", "shortcode_atts_gallery", "exact", sample_answer="shortcode_atts_gallery",
                       probes={"accept": ["The shortcode_atts_gallery filter"], "reject": ["post_gallery"]})  # fmt: skip
    too_loose = short("loose", "script_module_data_", sample_answer="script_module_data_{$module_id}",
                      probes={"accept": ["script_module_data_{$id}"],
                              "reject": ["print_script_module_data_"]})  # fmt: skip
    out = cli("dataset", "validate", str(suite_with(tmp_path, [too_strict, too_loose])))
    assert out.returncode == 2, out.stdout + out.stderr
    assert ("test strict, metadata.probes.accept.0: probe 'The shortcode_atts_gallery filter' scores 0, must score 1"
            in out.stderr)  # fmt: skip
    # the sample itself is refused: the placeholder read as a second answer
    assert "test loose: its own sample answer 'script_module_data_{$module_id}' scores 0" in out.stderr
    assert "test loose, metadata.probes.accept.0: probe 'script_module_data_{$id}' scores 0" in out.stderr
    assert "test loose, metadata.probes.reject.0: probe 'print_script_module_data_' scores 1" in out.stderr


def test_a_short_answer_without_sample_or_probes_is_an_error_in_our_format_and_a_warning_upstream(
    tmp_path: Path,
) -> None:
    bare = short("bare", r"\besc_url\b")
    ours = cli("dataset", "validate", str(suite_with(tmp_path / "a", [bare])))
    assert ours.returncode == 2
    assert "error: test bare: no metadata.sample_answer" in ours.stderr
    assert "error: test bare: metadata.probes needs accept" in ours.stderr
    upstream = {"id": "u", "category": "c", "type": "short_answer", "prompt": "Which?", "correct_answer": "esc_url",
                "answer_type": "exact"}  # fmt: skip
    theirs = cli("dataset", "validate", str(suite_with(tmp_path / "b", [upstream], upstream=True)))
    assert theirs.returncode == 0, theirs.stderr
    assert "warning: test u: metadata.probes needs accept" in theirs.stderr
    only_accept = short("half", r"\besc_url\b", sample_answer="esc_url()", probes={"accept": ["esc_url()"]})
    half = cli("dataset", "validate", str(suite_with(tmp_path / "c", [only_accept])))
    assert half.returncode == 2 and "test half: metadata.probes needs accept" in half.stderr


def test_a_regex_is_never_taken_as_its_own_sample_answer() -> None:
    regex = KnowledgeTest.model_validate(short("r", r"\bdid_action\b"))
    assert sample_answer(regex) is None
    given = KnowledgeTest.model_validate(short("g", r"\bdid_action\b", sample_answer=" did_action() "))
    assert sample_answer(given) == "did_action()"
    contains = KnowledgeTest.model_validate(short("c", "register_setting", "contains"))
    assert sample_answer(contains) == "register_setting"


@pytest.mark.parametrize(
    ("reply", "score"),
    [
        ("add_action( 'rest_api_init', 'my_routes' )", 1.0),
        ("do_action( 'rest_api_init', $server )", 1.0),
        ("get_option( 'rest_api_init' )", 1.0),
        # the match as a later argument is not the call's subject: the callee stays a rival
        ("add_action( 'init', 'rest_api_init' )", 0.0),
        ("add_action( 'rest_api_init', 'cb' ) or wp_loaded", 0.0),
    ],
)
def test_a_call_around_the_quoted_match_is_not_a_second_answer(reply: str, score: float) -> None:
    test = KnowledgeTest.model_validate(short("h", r"\brest_api_init\b"))
    assert score_answer(test, reply) == score


def execution(**fields: object) -> dict:
    base: dict[str, object] = {
        "id": "e-1", "category": "hooks", "prompt": "Do it.", "reference_solution": "function f() { return 1; }",
        "runtime_checks": {"assertions": [{"type": "function_exists", "function": "f"}]},
        "metadata": {"source_refs": ["wp-includes/plugin.php"]},
    }  # fmt: skip
    base.update(fields)
    return base


def write_execution(root: Path, test: dict) -> Path:
    folder = root / "x"
    (folder / "execution").mkdir(parents=True)
    (folder / "execution" / "hooks.json").write_text(json.dumps([test]))
    return folder


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"alternative_solutions": [{"description": "files", "files": {"p.php": "<?php"}}]},
         "alternative_solutions.0: a php_snippet test's alternative gives code"),
        ({"artifact_kind": "wp_plugin_files", "reference_solution": None, "reference_files": {"p.php": "<?php"},
          "alternative_solutions": [{"description": "code", "code": "x"}]},
         "alternative_solutions.0: a wp_plugin_files test's alternative gives files"),
        ({"alternative_solutions": [{"code": "function f() { return 2; }"}]}, "field alternative_solutions.0.description"),
        ({"alternative_solutions": [{"description": "d", "code": "x", "label": "y"}]},
         "field alternative_solutions.0.label"),
    ],
)  # fmt: skip
def test_a_malformed_alternative_solution_stops_the_load_naming_the_field(
    tmp_path: Path, fields: dict, message: str
) -> None:
    folder = write_execution(tmp_path, execution(**fields))
    with pytest.raises(InputError, match="test e-1") as err:
        load_suite(folder)
    assert message in str(err.value)
    assert cli("dataset", "validate", str(folder)).returncode == 2


def test_an_alternative_that_is_the_reference_itself_is_refused(tmp_path: Path) -> None:
    same = execution(alternative_solutions=[{"description": "copy", "code": "function f() { return 1; }"}])
    problems = lint_suite(load_suite(write_execution(tmp_path, same)))
    assert [(p.level, p.where) for p in problems] == [("error", "test e-1, alternative_solutions.0")]


def test_the_reference_run_plans_every_alternative_beside_its_reference(tmp_path: Path) -> None:
    from wpbench_k8s.config import load_config
    from wpbench_k8s.pipeline import plan_run

    alt = execution(alternative_solutions=[{"description": "returns 2", "code": "function f() { return 2; }"},
                                           {"description": "returns 3", "code": "function f() { return 3; }"}])  # fmt: skip
    folder = write_execution(tmp_path, alt)
    manifest = plan_run(load_config(None, {"dataset.path": str(folder)}), "reference")
    assert [(i.item_id, i.variant) for i in manifest.items] == [
        ("e-1", "baseline"), ("e-1--alt-1", "alternative-1"), ("e-1--alt-2", "alternative-2")
    ]  # fmt: skip
    assert [i.candidate.label for i in manifest.items if i.candidate] == [
        "reference", "alternative:1 (returns 2)", "alternative:2 (returns 3)"
    ]  # fmt: skip
    assert manifest.items[2].task is not None and manifest.items[2].task.code == "function f() { return 3; }"


def test_export_keeps_alternatives_and_probes(tmp_path: Path) -> None:
    suite: Suite = load_suite(SUITE)
    out = tmp_path / "s.jsonl"
    assert cli("dataset", "export", str(SUITE), "-o", str(out)).returncode == 0
    back = load_suite(out)
    assert [t.model_dump() for t in back.all_tests()] == [t.model_dump() for t in suite.all_tests()]
    assert sum(bool(t.alternative_solutions) for t in back.execution) >= 17
    assert all(t.metadata.probes for t in back.knowledge if t.type == "short_answer")


def test_a_test_named_like_another_tests_alternative_stops_the_plan(tmp_path: Path) -> None:
    """A hostile or unlucky id (`e-1--alt-1`) must not share an item id, and so a record, with e-1's alternative."""
    from wpbench_k8s.config import load_config
    from wpbench_k8s.pipeline import plan_run

    alt = execution(alternative_solutions=[{"description": "returns 2", "code": "function f() { return 2; }"}])
    twin = execution(id="e-1--alt-1")
    folder = tmp_path / "x"
    (folder / "execution").mkdir(parents=True)
    (folder / "execution" / "hooks.json").write_text(json.dumps([alt, twin]))
    with pytest.raises(InputError, match=r"item id e-1--alt-1 is laid out twice \(tests e-1 and e-1--alt-1\)"):
        plan_run(load_config(None, {"dataset.path": str(folder)}), "reference")
