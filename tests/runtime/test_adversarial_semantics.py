"""The adversarial suite's semantic classes (hostile_semantics.py): loose comparison, forbidden-pattern
evasion, and hidden PHP issues. Each case gets its exact status from the real grader; the issue cases
also the status the upstream profile reads from the recorded issues, and the issue rows themselves."""

from __future__ import annotations

import pytest
from gradekit import Graded, Grader, task
from hostile_semantics import CASES, Case

from wpbench_k8s.scoring import php_issues_as_error

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def graded(grader: Grader) -> dict[str, Graded]:
    return grader.grade_many({c.name: c.task for c in CASES})


def test_the_cases_cover_each_class() -> None:
    assert len(CASES) >= 15 and len({c.name for c in CASES}) == len(CASES)
    assert {c.cls for c in CASES} == {"loose comparison", "forbidden-pattern evasion", "hidden PHP issue"}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_semantic_attack(graded: dict[str, Graded], case: Case) -> None:
    g = graded[case.name]
    assert g.status == case.status, g.explain()
    assert g.exit_code == 0, g.explain()
    assert case.reason in g.verdict.reason, g.explain()
    recorded = [(i.level, i.message, i.phase) for i in g.verdict.php_issues]
    for level, fragment, phase in case.issues:
        assert any(lv == level and fragment in msg and ph == phase for lv, msg, ph in recorded), recorded
    if case.upstream is not None:
        assert php_issues_as_error(g.verdict).status == case.upstream, g.explain()


def test_a_check_that_gives_up_says_so(graded: dict[str, Graded]) -> None:
    (row,) = graded["pcre-backtrack"].verdict.static.forbidden
    assert row.matched and row.error is not None and "counts as matched" in row.error


def test_the_verdict_names_the_construct_the_tokens_show(graded: dict[str, Graded]) -> None:
    (row,) = graded["shell-variable-function"].verdict.static.forbidden
    assert row.matched and row.constructs == ["call:shell_exec"]
    assert "PHP's tokens show call:shell_exec" in graded["shell-variable-function"].verdict.reason


def test_what_stays_allowed(grader: Grader) -> None:
    """The honest neighbours of the attacks: numbers and numeric strings stay loose under `equals`, a
    prepared or table-name-only query, a method named like a forbidden function, and a string that
    function_exists() asks about are not forbidden constructs."""
    code = (
        "function wpbs_seven() { return '7.0'; }\n"
        "function wpbs_tally() { global $wpdb; $id = 3;\n"
        '\t$wpdb->get_var( $wpdb->prepare( "SELECT COUNT(*) FROM {$wpdb->posts} WHERE ID = %d", $id ) );\n'
        '\t$sql = "SELECT COUNT(*) FROM {$wpdb->posts}"; $wpdb->get_var( $sql );\n'
        "\t$wpdb->get_var( 'SELECT 1 FROM t WHERE id = ' . (int) $id );\n"
        "\treturn function_exists( 'shell_exec' ) ? 1 : 1; }\n"
        "class Wpbs_Runner { public function shell_exec( string $c ) { return $c; } }\n"
        "( new Wpbs_Runner() )->shell_exec( 'x' ); // eval( in a comment is text, not a construct\n"
    )
    doc = task(
        code,
        {"type": "returns_value", "function": "wpbs_seven", "expected": 7, "compare": "equals"},
        {"type": "returns_value", "function": "wpbs_seven", "expected": "7", "compare": "equals"},
        {"type": "returns_value", "function": "wpbs_tally", "expected": 1},
        static_checks={
            "forbidden_patterns": [
                {"pattern": r"\bshell_exec\s*\(\s*\$"},
                {
                    "pattern": r"/\$wpdb->(?:get_var|query)\s*\(\s*(?:\"[^\"]*\$(?!wpdb->)|([\"'])[^\"']*\1\s*\.\s*\$(?!wpdb->))/"
                },
                {"pattern": r"\bEVAL\s*\("},
            ]
        },
    )
    g = grader.grade(doc)
    assert g.status == "passed", g.explain()
    assert [r.constructs for r in g.verdict.static.forbidden] == [[], [], []]
