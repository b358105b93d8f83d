"""What the supervisor's facts score (supervisor/verdict.php `outcome_of`), fed hand-made facts with the
grader image's PHP: the task found broken before candidate code ran is harness_error (exit 2); from then
on every anomaly is the candidate's (error, timeout, failed), and a crash after the last assertion keeps
the verdict with a note."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from gradekit import php_cases

pytestmark = pytest.mark.docker

CASES = Path(__file__).resolve().parent / "php" / "outcome_cases.php"


@pytest.fixture(scope="module")
def cases(grader_image: str) -> dict[str, Any]:
    return php_cases(grader_image, CASES)


@pytest.mark.parametrize(
    ("case", "status", "exit_code", "fragment"),
    [
        ("violation_before_setup", "harness_error", 2, "before candidate code ran"),
        ("boot_timed_out", "harness_error", 2, "WordPress did not boot: timed out after 4 s (setup_timeout_seconds"),
        ("setup_timed_out", "harness_error", 2, "setup did not complete: timed out after 4 s (setup_timeout_seconds"),
        ("setup_failed", "harness_error", 2, "setup failed: boom"),
        ("violation_after_setup", "error", 0, "once candidate code could act"),
        ("timed_out_in_candidate", "timeout", 0, "timed out after 2.5 s in candidate code"),
        ("exit_in_candidate", "error", 0, "exit() or die() was called in candidate code"),
        ("sigkill_in_candidate", "error", 0, "signal 9 (SIGKILL: the container memory limit?) in candidate code"),
        ("crash_in_teardown", "passed", 0, "the runner did not finish cleanly"),
        ("failed_and_trespass", "failed", 0, "1 of 1 assertions failed; first: #0 option_value: got 1; candidate code"),
        ("uncaught_and_failed", "error", 0, "uncaught Error in candidate code: e (f:1); 1 of 1 assertions failed"),
        ("passed", "passed", 0, "all 1 assertions passed"),
    ],
)
def test_what_the_facts_score(cases: dict[str, Any], case: str, status: str, exit_code: int, fragment: str) -> None:
    got = cases[case]
    assert (got["status"], got["exit"]) == (status, exit_code), got
    assert fragment in got["reason"], got
