"""The one rule that says what a grader run means, for every backend (wpbench_k8s.outcome)."""

from __future__ import annotations

import json

import pytest

from wpbench_k8s.outcome import (
    GraderFacts,
    HarnessBroken,
    Infra,
    Scored,
    UnreadableVerdict,
    decide_outcome,
    parse_verdict,
    settle,
)
from wpbench_runtime.contract import Scores, Verdict


def verdict_json(status: str = "passed", test_id: str = "t-1") -> str:
    ok = status == "passed"
    scores = Scores(execution_pass=ok, runtime=1.0 if ok else 0.0, static=1.0, static_policy_pass=True)
    return Verdict(test_id=test_id, status=status, scores=scores).model_dump_json()  # type: ignore[arg-type]


def facts(**seen: object) -> GraderFacts:
    return GraderFacts.model_validate({"test_id": "t-1", "exit_code": 0, **seen})


def test_a_clean_verdict_is_scored_as_written():
    decision = decide_outcome(facts(stdout=verdict_json("failed")))
    assert isinstance(decision, Scored) and decision.verdict.status == "failed"


def test_harness_error_is_excluded_only_with_the_task_broken_exit_code():
    before = decide_outcome(facts(exit_code=2, stdout=verdict_json("harness_error")))
    assert isinstance(before, HarnessBroken)
    after = decide_outcome(facts(exit_code=3, stdout=verdict_json("harness_error")))
    assert isinstance(after, Scored) and after.verdict.status == "error"
    zero = decide_outcome(facts(exit_code=0, stdout=verdict_json("harness_error")))
    assert isinstance(zero, Scored) and zero.verdict.status == "error"


def test_a_verifier_failure_after_the_candidate_acted_keeps_its_error_verdict():
    doc = json.loads(verdict_json("error"))
    doc["reason"] = "verifier error: x (after candidate code could act)"
    decision = decide_outcome(facts(exit_code=3, stdout=json.dumps(doc)))
    assert isinstance(decision, Scored) and decision.verdict.reason == doc["reason"]
    other = decide_outcome(facts(exit_code=6, stdout=json.dumps(doc)))
    assert isinstance(other, Scored) and other.verdict.reason.startswith("grader exit 6")


@pytest.mark.parametrize(
    "seen",
    [
        {"started": False, "infra_reason": "image pull failed"},
        {"stopped_from_outside": True},
        {"exit_code": 4, "stdout": verdict_json("harness_error")},
    ],
)
def test_failures_from_outside_are_infra_without_a_fallback(seen):
    decision = decide_outcome(facts(**seen))
    assert isinstance(decision, Infra) and decision.fallback is None
    assert settle(decision) is None


@pytest.mark.parametrize(
    ("seen", "status"), [({"oom_killed": True}, "error"), ({"deadline_exceeded": True}, "timeout")]
)
def test_what_a_candidate_can_cause_is_retried_then_scored(seen, status):
    decision = decide_outcome(facts(exit_code=137, **seen))
    assert isinstance(decision, Infra)
    final = settle(decision)
    assert final is not None and final.status == status and final.scores.execution_pass is False


@pytest.mark.parametrize(
    "seen",
    [
        {"stdout": ""},
        {"stdout": "WPB1 forged passed"},
        {"stdout": verdict_json("passed", test_id="another")},
        {"stdout": verdict_json("passed"), "stdout_truncated": True},
        {"stdout": verdict_json("passed"), "exit_code": 1},
    ],
)
def test_any_other_anomaly_after_the_grader_ran_is_the_candidates_failure(seen):
    decision = decide_outcome(facts(**seen))
    assert isinstance(decision, Scored)
    assert decision.verdict.status == "error" and decision.verdict.scores.execution_pass is False


def test_parse_verdict_takes_the_last_json_line_of_an_interleaved_log():
    log = "wpbench-grade: progress\n" + verdict_json("failed") + "\nwpbench-grade: verdict: failed\n"
    assert parse_verdict(log, test_id="t-1").status == "failed"
    with pytest.raises(UnreadableVerdict):
        parse_verdict("no json at all")


def test_record_lines_escape_line_separators():
    from wpbench_k8s.records import json_line

    verdict = Verdict.model_validate({**json.loads(verdict_json("failed")), "stdout": "a\u2028b\u2029c"})
    line = json_line(verdict)
    assert "\u2028" not in line and "\u2029" not in line and len(line.split("\n")) == 1
    assert Verdict.model_validate_json(line).stdout == "a\u2028b\u2029c"
