"""A run's conditions follow its phase (one table), keep lastTransitionTime while unchanged, and the
lifecycle Events fire once per transition."""

from __future__ import annotations

import pytest

from wpbench_controller.conditions import lifecycle_events, run_conditions, summarise


def table(conditions):
    return {c["type"]: c["status"] for c in conditions}


@pytest.mark.parametrize(
    ("phase", "reason", "expect"),
    [
        (
            "Pending",
            "WaitingForPayload",
            {"Ready": "False", "Running": "False", "Succeeded": "False", "Failed": "False"},
        ),
        ("Running", "Grading", {"Ready": "True", "Running": "True", "Succeeded": "False", "Failed": "False"}),
        ("Succeeded", "AllGraded", {"Ready": "True", "Running": "False", "Succeeded": "True", "Failed": "False"}),
        (
            "Failed",
            "StoppedAtFirstError",
            {"Ready": "True", "Running": "False", "Succeeded": "False", "Failed": "True"},
        ),
        ("Failed", "InvalidPayload", {"Ready": "False", "Running": "False", "Succeeded": "False", "Failed": "True"}),
        ("Cancelled", "Cancelled", {"Ready": "True", "Running": "False", "Succeeded": "False", "Failed": "False"}),
    ],
)
def test_conditions_follow_the_phase(phase, reason, expect):
    conditions = run_conditions(None, phase, reason, "why", 3, "2026-12-01T00:00:00Z")
    assert table(conditions) == expect
    assert all(c["observedGeneration"] == 3 and c["reason"] and c["message"] for c in conditions)
    held = [c for c in conditions if c["status"] == "True" and c["type"] != "Ready"]
    assert all(c["reason"] == reason for c in held)


def test_last_transition_time_moves_only_with_the_status():
    first = run_conditions(None, "Running", "Grading", "1/4", 1, "t1")
    again = run_conditions(first, "Running", "Grading", "2/4", 1, "t2")
    assert [c["lastTransitionTime"] for c in again] == ["t1"] * 4
    done = run_conditions(again, "Succeeded", "AllGraded", "4 items graded", 1, "t3")
    stamps = {c["type"]: c["lastTransitionTime"] for c in done}
    assert stamps == {"Ready": "t1", "Running": "t3", "Succeeded": "t3", "Failed": "t1"}
    reasons = {c["type"]: c["reason"] for c in done}
    assert reasons["Succeeded"] == "AllGraded" and reasons["Failed"] == "AllGraded"


def test_lifecycle_events_fire_once():
    pending = run_conditions(None, "Pending", "WaitingForPayload", "waiting", 1, "t0")
    running = run_conditions(pending, "Running", "Grading", "", 1, "t1")
    assert lifecycle_events(pending, running, "Pending", "Running") == [("Normal", "Accepted")]
    assert lifecycle_events(running, running, "Running", "Running") == []
    done = run_conditions(running, "Succeeded", "AllGraded", "", 1, "t2")
    assert lifecycle_events(running, done, "Running", "Succeeded") == [("Normal", "Finished")]
    assert lifecycle_events(done, done, "Succeeded", "Succeeded") == []
    failed = run_conditions(running, "Failed", "StoppedAtFirstError", "", 1, "t2")
    assert lifecycle_events(running, failed, "Running", "Failed") == [("Warning", "Finished")]
    cancelled = run_conditions(running, "Cancelled", "Cancelled", "", 1, "t2")
    assert lifecycle_events(running, cancelled, "Running", "Cancelled") == [("Normal", "Cancelled")]
    # a run refused outright is never accepted, and says it finished
    invalid = run_conditions(None, "Failed", "InvalidPayload", "invalid payload", 1, "t0")
    assert lifecycle_events(None, invalid, "", "Failed") == [("Warning", "Finished")]


def test_summaries_stay_short():
    entries = [(f"item-{n}", "pod evicted " * 50) for n in range(8)]
    text = summarise("attempts retried", entries)
    assert text.startswith("8 attempts retried: item-0 (") and text.endswith("; and 3 more")
    assert len(text) < 1024
