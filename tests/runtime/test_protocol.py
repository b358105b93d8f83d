"""The supervisor's event protocol (supervisor/protocol.php), fed scripted byte streams with the grader
image's PHP: which events count, when reading stops, and whether a violation came once candidate code
could act (the candidate's failure) or before (a task found broken)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from gradekit import php_cases

pytestmark = pytest.mark.docker

CASES = Path(__file__).resolve().parent / "php" / "protocol_cases.php"


@pytest.fixture(scope="module")
def cases(grader_image: str) -> dict[str, Any]:
    return php_cases(grader_image, CASES, "-d", "memory_limit=512M")


def test_lines_without_the_nonce_are_ignored(cases: dict[str, Any]) -> None:
    c = cases["forged"]
    assert c["events"] == ["hello", "booted"] and c["unauthenticated"] == 2 and c["violation"] is None


def test_a_violation_before_setup_is_not_the_candidates(cases: dict[str, Any]) -> None:
    c = cases["order_before"]
    assert c["violation"] and c["after_setup"] is False and c["finished"] is True


def test_a_violation_after_setup_is_the_candidates(cases: dict[str, Any]) -> None:
    assert cases["order_after"]["after_setup"] is True


def test_an_oversized_line_or_channel_ends_reading_as_the_candidates_violation(cases: dict[str, Any]) -> None:
    assert "longer than" in cases["long_line_after"]["violation"] and cases["long_line_after"]["after_setup"] is True
    assert "bytes on the event channel" in cases["channel_flood"]["violation"]
    assert cases["channel_flood"]["after_setup"] is True


def test_after_a_failed_setup_no_candidate_code_ran(cases: dict[str, Any]) -> None:
    c = cases["setup_failed"]
    assert c["could_act"] is False and c["violation"] and c["after_setup"] is False


def test_ended_and_done_finish_the_protocol(cases: dict[str, Any]) -> None:
    assert cases["ended"]["finished"] is True and cases["ended"]["events"][-1] == "ended"
    assert cases["complete"]["events"][-1] == "done" and cases["complete"]["violation"] is None


def test_our_event_survives_junk_glued_in_front_of_it(cases: dict[str, Any]) -> None:
    c = cases["glued_prefix"]
    assert c["events"][-1] == "candidate" and c["violation"] is None
