"""Static checks: pattern forms, invalid regexes, severities and the static scores."""

from __future__ import annotations

import pytest
from gradekit import Graded, Grader, task

pytestmark = pytest.mark.docker

CODE = "add_action( 'init', 'wpbp_x' ); // registers wpbp/count-words\nfunction wpbp_x() { return eval( '1;' ); }"
OK = {"type": "function_exists", "function": "wpbp_x"}
REQUIRED = [
    {"pattern": "add_action", "weight": 1},  # delimiterless
    {"pattern": "wpbp/count-words", "weight": 1},  # delimiterless with a slash: wrapped, no escaping needed
    {"pattern": "/ADD_ACTION\\(\\s*'init'/i", "weight": 2},  # delimited with a flag, used as written
    {"pattern": "#ADD_ACTION#", "weight": 1},  # delimited, case-sensitive: no match
    {"pattern": "/unclosed(/", "weight": 1, "description": "broken regex"},  # invalid: reported
]


@pytest.fixture(scope="module")
def graded(grader: Grader) -> dict[str, Graded]:
    results: dict[str, Graded] = grader.grade_many(
        {
            "warning_only": task(
                CODE,
                OK,
                static_checks={
                    "required_patterns": REQUIRED,
                    "forbidden_patterns": [
                        {"pattern": "\\beval\\s*\\(", "severity": "warning", "description": "eval"},
                        {"pattern": "shell_exec", "severity": "error"},
                    ],
                },
            ),
            "forbidden_error": task(
                CODE,
                OK,
                static_checks={"forbidden_patterns": [{"pattern": "/\\bEVAL\\s*\\(/i", "description": "No eval()"}]},
            ),
        }
    )
    return results


def test_pattern_forms(graded: dict[str, Graded]) -> None:
    static = graded["warning_only"].verdict.static
    assert static is not None and static.syntax_ok
    assert [p.matched for p in static.required] == [True, True, True, False, False]
    assert [p.error is None for p in static.required] == [True, True, True, True, False]
    assert "missing closing parenthesis" in (static.required[4].error or "")


def test_static_score_is_matched_required_weight(graded: dict[str, Graded]) -> None:
    g = graded["warning_only"]
    assert g.verdict.scores.static == pytest.approx(4 / 6, abs=1e-6)


def test_warning_severity_is_recorded_not_failing(graded: dict[str, Graded]) -> None:
    g = graded["warning_only"]
    assert g.status == "passed", g.explain()
    assert g.verdict.static is not None and g.verdict.static.forbidden[0].matched
    assert g.verdict.scores.static_policy_pass and g.verdict.scores.execution_pass


def test_error_severity_fails_the_test(graded: dict[str, Graded]) -> None:
    g = graded["forbidden_error"]
    assert g.status == "failed", g.explain()
    assert g.verdict.reason == "forbidden pattern matched: No eval()"
    scores = g.verdict.scores
    assert (scores.execution_pass, scores.static_policy_pass, scores.runtime, scores.static) == (False, False, 1.0, 1.0)
