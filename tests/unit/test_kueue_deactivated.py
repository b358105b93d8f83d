"""A grader Job whose Kueue Workload was deactivated ends as infrastructure (never scored), and only a Job
that never ended by itself: a verdict the grader reached before is kept. The reasons are Kueue's own
condition words (kueue v0.17 apis/kueue/v1beta2: Evicted/Deactivated, Requeued/RequeuingLimitExceeded).
The same with Kueue on the real cluster: tests/k8s/test_kueue_cluster.py."""

from __future__ import annotations

import json

from wpbench_controller.kueue import deactivation
from wpbench_k8s.kube.facts import attempt_facts, job_finished
from wpbench_k8s.kube.names import ANNOTATION_KUEUE_DEACTIVATED
from wpbench_k8s.outcome import Infra, Scored, decide_outcome
from wpbench_runtime.contract import Scores, Verdict

WHY = "Deactivated: The workload is deactivated"


def job(*conditions: str, marked: bool = True) -> dict:
    meta: dict = {"name": "r-item-a1", "annotations": {ANNOTATION_KUEUE_DEACTIVATED: WHY} if marked else {}}
    conds = [{"type": c, "status": "True"} for c in conditions]
    return {"metadata": meta, "spec": {"suspend": True}, "status": {"conditions": conds}}


def test_a_deactivated_job_is_finished_and_its_attempt_is_infra_with_kueues_reason():
    assert job_finished(job()) and not job_finished(job(marked=False))
    decision = decide_outcome(attempt_facts(job(), None, test_id="t"))
    assert (
        isinstance(decision, Infra) and "Kueue deactivated its Workload" in decision.reason and WHY in decision.reason
    )


def test_a_grader_killed_by_the_deactivation_was_stopped_from_outside():
    pod = {"metadata": {"name": "p"}, "status": {"containerStatuses": [{"name": "grader", "state": {"running": {}}}]}}
    decision = decide_outcome(attempt_facts(job(), pod, test_id="t"))
    assert isinstance(decision, Infra) and "stopped from outside" in decision.reason


def test_a_verdict_reached_before_the_deactivation_stands():
    scores = Scores(execution_pass=True, runtime=1, static=1, static_policy_pass=True)
    verdict = Verdict(test_id="t", status="passed", scores=scores)
    pod = {"metadata": {"name": "p"}, "status": {"phase": "Succeeded", "containerStatuses": [
        {"name": "grader", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}}  # fmt: skip
    log = (verdict.model_dump_json() + "\n").encode()
    decision = decide_outcome(attempt_facts(job("Complete"), pod, test_id="t", log=log))
    assert isinstance(decision, Scored), decision


def test_kueues_reason_is_read_from_its_conditions():
    active = {"metadata": {}, "spec": {"active": True}, "status": {}}
    assert deactivation(active) == "" and deactivation({"metadata": {}, "spec": {}}) == ""
    evicted = {"metadata": {}, "spec": {"active": False}, "status": {"conditions": [
        {"type": "Evicted", "status": "True", "reason": "Deactivated", "message": "The workload is deactivated"}]}}  # fmt: skip
    assert deactivation(evicted) == WHY
    limit = {"metadata": {}, "spec": {"active": False}, "status": {"conditions": [
        {"type": "Requeued", "status": "False", "reason": "RequeuingLimitExceeded", "message": "limit"}]}}  # fmt: skip
    assert deactivation(limit) == "RequeuingLimitExceeded: limit"
    assert deactivation({"metadata": {}, "spec": {"active": False}}) == "spec.active is false"
    assert len(deactivation(json.loads(json.dumps(evicted).replace("deactivated", "x" * 2000)))) <= 500
