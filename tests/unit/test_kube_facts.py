"""What a finished grader Job and its pod mean, read as the API server reports them (no cluster needed).

Each row is a status shape the kubelet or the Job controller writes; the decision is outcome.py's.
"""

from __future__ import annotations

import json

import pytest

from wpbench_k8s.kube.facts import attempt_facts, events_reason, job_finished, status_facts, waiting_reason
from wpbench_k8s.outcome import MAX_GRADER_OUTPUT_BYTES, HarnessBroken, Infra, Scored, decide_outcome, settle
from wpbench_runtime.contract import Scores, Verdict

VERDICT = Verdict(
    test_id="t-1", status="passed", scores=Scores(execution_pass=True, runtime=1, static=1, static_policy_pass=True)
)


def job(condition: str | None = "Failed", reason: str = "") -> dict:
    conds = [{"type": condition, "status": "True", "reason": reason, "message": f"job {reason}"}] if condition else []
    return {"metadata": {"name": "j"}, "status": {"conditions": conds}}


def pod(
    code: int | None = None,
    *,
    term_reason: str = "",
    pod_reason: str = "",
    disrupted: str = "",
    unschedulable: str = "",
    waiting: str = "",
) -> dict:
    status: dict = {"phase": "Failed" if code not in (None, 0) else "Succeeded"}
    container: dict = {"name": "grader", "state": {}}
    if code is not None:
        container["state"]["terminated"] = {
            "exitCode": code,
            "reason": term_reason or ("Completed" if code == 0 else "Error"),
            "message": "",
            "startedAt": "2026-01-01T00:00:00Z",
            "finishedAt": "2026-01-01T00:00:02Z",
        }
    if waiting:
        container["state"]["waiting"] = {"reason": waiting, "message": "pull access denied"}
    status["containerStatuses"] = [container]
    conds = []
    if disrupted:
        conds.append({"type": "DisruptionTarget", "status": "True", "reason": disrupted})
    if unschedulable:
        status["phase"] = "Pending"
        conds.append({"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": unschedulable})
    status["conditions"] = conds
    if pod_reason:
        status["reason"] = pod_reason
    return {"metadata": {"name": "p", "creationTimestamp": "x"}, "status": status}


def decide(job_: dict, pod_: dict | None, log: bytes | None = b"", **kw) -> object:
    return decide_outcome(attempt_facts(job_, pod_, test_id="t-1", log=log, **kw))


def test_a_verdict_in_the_log_is_scored():
    log = b"PHP Warning: on stderr\n" + VERDICT.model_dump_json().encode() + b"\n"
    decision = decide(job("Complete"), pod(0), log)
    assert isinstance(decision, Scored) and decision.verdict.status == "passed"
    assert attempt_facts(job("Complete"), pod(0), test_id="t-1", log=log).duration_ms == 2000


def test_exit_2_with_a_harness_error_verdict_is_the_task_broken():
    broken = VERDICT.model_copy(update={"status": "harness_error", "reason": "fixture failed"})
    decision = decide(job(), pod(2), broken.model_dump_json().encode())
    assert isinstance(decision, HarnessBroken)


@pytest.mark.parametrize(
    "reason", ["EvictionByEvictionAPI", "DeletionByTaintManager", "PreemptionByScheduler", "DeletionByPodGC"]
)
def test_disruption_is_stopped_from_outside_never_scored(reason):
    decision = decide(job(), pod(137, disrupted=reason))
    assert isinstance(decision, Infra) and decision.fallback is None and reason in decision.reason


def test_evicted_pod_without_condition_is_stopped_from_outside():
    decision = decide(job(), pod(None, pod_reason="Evicted"))
    assert isinstance(decision, Infra) and decision.fallback is None


def test_exit_4_is_a_stop_from_outside():
    decision = decide(job(), pod(4), b"")
    assert isinstance(decision, Infra) and decision.fallback is None and "outside" in decision.reason


def test_oom_killed_container_is_retried_then_scored_as_error():
    decision = decide(job(), pod(137, term_reason="OOMKilled"))
    assert isinstance(decision, Infra)
    assert decision.fallback is not None and decision.fallback.status == "error"
    assert settle(decision) == decision.fallback


def test_pod_deadline_is_retried_then_scored_as_timeout_even_with_the_supervisors_exit_4():
    # The kubelet sends SIGTERM at activeDeadlineSeconds; the supervisor reports a signal from outside
    # (exit 4), but the deadline is what stopped it: the candidate's timeout once retries are spent.
    decision = decide(job(reason="DeadlineExceeded"), pod(4, pod_reason="DeadlineExceeded"))
    assert isinstance(decision, Infra) and decision.fallback is not None
    assert decision.fallback.status == "timeout"


def test_job_deadline_after_a_late_start_is_not_the_candidates():
    decision = decide(job(reason="DeadlineExceeded"), pod(143))
    assert isinstance(decision, Infra) and decision.fallback is None


def test_unschedulable_pod_never_ran_and_says_why():
    why = "0/1 nodes are available: 1 Insufficient cpu."
    p = pod(None, unschedulable=why)
    assert waiting_reason(p) == f"Unschedulable: {why}"
    decision = decide(job(reason="DeadlineExceeded"), p)
    assert isinstance(decision, Infra) and decision.fallback is None and "Insufficient cpu" in decision.reason


def test_image_pull_failure_never_ran():
    p = pod(None, waiting="ImagePullBackOff")
    assert waiting_reason(p).startswith("ImagePullBackOff")
    assert isinstance(decide(job(reason="DeadlineExceeded"), p), Infra)


def test_no_pod_at_all_reports_the_jobs_warning_event():
    events = [
        {"type": "Normal", "reason": "SuccessfulCreate", "message": "x", "lastTimestamp": "2026-01-01T00:00:09Z"},
        {"type": "Warning", "reason": "FailedCreate", "message": "exceeded quota: q",
         "lastTimestamp": "2026-01-01T00:00:01Z"},
    ]  # fmt: skip
    assert events_reason(events) == "FailedCreate: exceeded quota: q"
    decision = decide(job(reason="DeadlineExceeded"), None, events=events)
    assert isinstance(decision, Infra) and decision.fallback is None and "exceeded quota" in decision.reason


def test_a_pod_deleted_after_an_early_scheduling_warning_was_stopped_from_outside():
    # Seen on the loaded cluster (tests/k8s/test_failure_parity.py): the pod waited for CPU, ran, and was
    # deleted; the Job counted it failed. Its FailedScheduling event outlives it and must not say "never ran".
    events = [{"type": "Warning", "reason": "FailedScheduling", "message": "0/1 nodes are available: 1 Insufficient cpu.",
               "lastTimestamp": "2026-01-01T00:00:01Z"}]  # fmt: skip
    facts = attempt_facts(job(reason="BackoffLimitExceeded"), None, test_id="t-1", events=events)
    assert facts.started and facts.stopped_from_outside, facts
    decision = decide_outcome(facts)
    assert isinstance(decision, Infra) and decision.fallback is None and "outside" in decision.reason


def test_a_log_that_stays_unreadable_is_infra_without_fallback():
    facts = attempt_facts(job("Complete"), pod(0), test_id="t-1", log=None, log_error="404 NotFound")
    assert not facts.started and "unreadable" in facts.infra_reason
    decision = decide_outcome(facts)
    assert isinstance(decision, Infra) and decision.fallback is None


def test_a_flooded_log_is_cut_and_scored_as_error():
    log = b"x" * (MAX_GRADER_OUTPUT_BYTES + 1)
    facts = attempt_facts(job("Complete"), pod(0), test_id="t-1", log=log)
    assert facts.stdout_truncated and len(facts.stdout) == MAX_GRADER_OUTPUT_BYTES
    decision = decide_outcome(facts)
    assert isinstance(decision, Scored) and decision.verdict.status == "error"


@pytest.mark.parametrize(
    "message",
    [json.dumps({"status": "failed"}), json.dumps({"status": "passed", "execution_pass": True}), "x" * 4096],
)
def test_the_termination_message_is_never_read(message):
    """/dev/termination-log is writable by every process in the container: what it says changes nothing."""
    p = pod(0)
    p["status"]["containerStatuses"][0]["state"]["terminated"]["message"] = message
    decision = decide(job("Complete"), p, VERDICT.model_dump_json().encode())
    assert isinstance(decision, Scored) and decision.verdict == VERDICT


def test_status_alone_decides_only_when_the_log_is_not_the_answer():
    assert status_facts(job("Complete"), pod(0), test_id="t-1") is None
    assert status_facts(job(), pod(137, term_reason="OOMKilled"), test_id="t-1") is not None
    assert job_finished(job("Complete")) and job_finished(job()) and not job_finished(job(None))


def _deleted(p: dict, *, at: str, grace: int = 30) -> dict:
    p["metadata"].update({"deletionTimestamp": at, "deletionGracePeriodSeconds": grace})
    return p


def test_a_pod_deleted_while_its_grader_runs_was_stopped_from_outside_not_never_ran():
    # Seen in CI (tests/k8s/test_failure_parity.py): `delete pod` on a running grader; the Job controller
    # counts a terminating pod as failed at once, so the Job was finished while the pod, being deleted,
    # still showed its container running (no terminated state yet).
    running = _deleted(pod(None), at="2026-01-01T00:00:33Z")
    running["status"]["containerStatuses"][0]["state"] = {"running": {"startedAt": "2026-01-01T00:00:00Z"}}
    facts = attempt_facts(job(reason="BackoffLimitExceeded"), running, test_id="t-1", log=b"")
    assert facts.stopped_from_outside and facts.started and "deleted while running" in facts.detail
    decision = decide_outcome(facts)
    # retried, then infra_error (excluded): never scored as the candidate's
    assert isinstance(decision, Infra) and settle(decision) is None
    # Killed by the deletion's SIGTERM (finished after it was asked for at 00:00:03): the same, whatever its log says.
    killed = _deleted(pod(143), at="2026-01-01T00:00:31Z")
    assert attempt_facts(job(reason="BackoffLimitExceeded"), killed, test_id="t-1", log=b"x").stopped_from_outside


def test_a_pod_deleted_after_its_grader_ended_is_read_from_its_log():
    # The grader finished at 00:00:02; the deletion was asked for at 00:00:10 (deletionTimestamp minus the grace).
    ended = _deleted(pod(0), at="2026-01-01T00:00:40Z")
    log = (VERDICT.model_dump_json() + "\n").encode()
    assert status_facts(job("Complete"), ended, test_id="t-1") is None
    assert isinstance(decide(job("Complete"), ended, log=log), Scored)


def test_a_pod_deleted_mid_run_whose_log_is_gone_was_stopped_from_outside():
    # Seen in CI (tests/k8s/test_failure_parity.py[stopped-from-outside]): `delete pod` 3 s into the candidate;
    # the kubelet's SIGTERM ended the grader (exit 143 at 00:00:02) and its final delete reset the grace to 0 and
    # deletionTimestamp to 00:00:03, after the exit; the Job's finalizer kept the pod listed, then it went and the
    # log read got 404. That is a stop from outside (retried, never scored), not a grader that never ran.
    gone = _deleted(pod(143), at="2026-01-01T00:00:03Z", grace=0)
    facts = attempt_facts(job(reason="BackoffLimitExceeded"), gone, test_id="t-1", log=None, log_error="404 NotFound")
    assert facts.started and facts.stopped_from_outside and "404" in facts.detail, facts
    decision = decide_outcome(facts)
    assert isinstance(decision, Infra) and settle(decision) is None
    # A pod nobody deleted whose log cannot be read stays "did not run" (the reading failed, not the grader).
    assert not attempt_facts(job("Complete"), pod(0), test_id="t-1", log=None, log_error="500").started


def test_a_pending_pod_deleted_at_the_jobs_deadline_never_ran_and_says_why():
    # The Job controller deletes a pod still waiting for CPU when the Job's deadline passes: never started.
    why = "0/1 nodes are available: 1 Insufficient cpu."
    waiting = _deleted(pod(None, unschedulable=why), at="2026-01-01T00:10:30Z")
    facts = attempt_facts(job(reason="DeadlineExceeded"), waiting, test_id="t-1")
    assert not facts.started and not facts.stopped_from_outside and "Insufficient cpu" in facts.infra_reason


def test_what_the_candidate_caused_outranks_a_deletion_that_came_after_it():
    # The pod's own deadline fired (the kubelet's kill) and the pod was then deleted, say by the Job controller
    # at the Job's deadline while the kill ran: still the candidate's timeout once retries are spent, not excluded.
    late = _deleted(pod(None, pod_reason="DeadlineExceeded"), at="2026-01-01T00:00:33Z")
    late["status"]["containerStatuses"][0]["state"] = {"running": {"startedAt": "2026-01-01T00:00:00Z"}}
    decision = decide(job(reason="DeadlineExceeded"), late)
    assert isinstance(decision, Infra) and decision.fallback is not None and decision.fallback.status == "timeout"
    # OOM-killed, then deleted: OOM (the candidate's error once retries are spent), not a stop from outside.
    oom = _deleted(pod(137, term_reason="OOMKilled"), at="2026-01-01T00:00:31Z")
    facts = attempt_facts(job(reason="BackoffLimitExceeded"), oom, test_id="t-1", log=b"")
    assert facts.oom_killed and not facts.stopped_from_outside


def test_a_grader_on_a_lost_node_ends_at_failure_target_and_is_stopped_from_outside():
    # Seen on kind (tests/k8s/test_kind_multinode.py): a worker's node container stopped mid-grade. The taint
    # manager deletes the pod (DisruptionTarget), which stays Terminating with its container "running", since no
    # kubelet confirms; the Job controller sets FailureTarget and would set Failed only once the pod is gone.
    lost = _deleted(pod(None, disrupted="DeletionByTaintManager"), at="2026-01-01T00:01:00Z")
    lost["status"].update(phase="Running")
    lost["status"]["containerStatuses"][0]["state"] = {"running": {"startedAt": "2026-01-01T00:00:00Z"}}
    failing = job("FailureTarget", reason="BackoffLimitExceeded")
    assert job_finished(failing) and not job_finished(job(None))
    facts = attempt_facts(failing, lost, test_id="t-1", log=None, log_error="node unreachable")
    assert facts.stopped_from_outside and "DeletionByTaintManager" in facts.detail
    assert isinstance(decide_outcome(facts), Infra)  # retried as infrastructure, never the candidate's
    gone = attempt_facts(failing, None, test_id="t-1", log=None)  # the pod already gone: the same
    assert gone.stopped_from_outside and "BackoffLimitExceeded" in gone.detail
