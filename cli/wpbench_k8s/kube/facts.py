"""Kubernetes' side of the one outcome rule: a finished grader Job and its pod, as `GraderFacts`.

What the facts mean is decided in `wpbench_k8s.outcome.decide_outcome`, for every backend alike.
Here only the reading: which pod condition, container state or Job condition says what.

- DisruptionTarget, eviction, a lost node, a pod deleted before its grader ended, a pod gone after the Job
  counted it failed, the Job's own deadline after a late start                 -> stopped from outside
- the grader container's reason OOMKilled                                      -> OOM-killed
- the pod's activeDeadlineSeconds (status.reason DeadlineExceeded)            -> the outer deadline
- no container ever ran (unschedulable, quota, image pull)                     -> never started
- a log that stays unreadable for LOG_READ_TRIES reads                         -> never started (infra)
- Kueue deactivated the Job's Workload (annotation ANNOTATION_KUEUE_DEACTIVATED) -> never started, or
  stopped from outside when its pod had run: the Job would otherwise wait, suspended, forever
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from wpbench_k8s.kube.client import EVENTS, Kube, KubeError
from wpbench_k8s.kube.names import ANNOTATION_KUEUE_DEACTIVATED, GRADER_CONTAINER
from wpbench_k8s.outcome import MAX_GRADER_OUTPUT_BYTES, GraderFacts
from wpbench_runtime.contract import split_sequence_output

LOG_READ_TRIES = 5  # reads of a finished pod's log before the attempt counts as infrastructure
_STOPPED_POD_REASONS = {"Evicted", "NodeLost", "Preempting", "Terminated", "Shutdown", "NodeShutdown"}
# Why a container waits instead of running: each is the infrastructure's, never the candidate's.
_STUCK_WAITING = {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError",
                  "CreateContainerError", "RunContainerError"}  # fmt: skip


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    """The object's status condition `kind` when it is True."""
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind and cond.get("status") == "True":
            return dict(cond)
    return None


def kueue_deactivated(job: dict[str, Any]) -> str:
    """Why Kueue will never admit the Job again ('' when it may)."""
    return str((job["metadata"].get("annotations") or {}).get(ANNOTATION_KUEUE_DEACTIVATED) or "")


def job_failed(job: dict[str, Any]) -> dict[str, Any] | None:
    """The Job's failure condition: `Failed`, or `FailureTarget`, which Kubernetes >= 1.31 sets first and turns into
    `Failed` only once every pod has terminated. A pod on a lost node never does, so only `FailureTarget` ends it."""
    return condition(job, "Failed") or condition(job, "FailureTarget")


def job_finished(job: dict[str, Any]) -> bool:
    return bool(condition(job, "Complete") or job_failed(job) or kueue_deactivated(job))


def _container_status(pod: dict[str, Any]) -> dict[str, Any]:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if cs.get("name") == GRADER_CONTAINER:
            return dict(cs)
    return {}


def grader_terminated(pod: dict[str, Any]) -> dict[str, Any]:
    """The grader container's `state.terminated` (empty when it has not terminated)."""
    return dict((_container_status(pod).get("state") or {}).get("terminated") or {})


def waiting_reason(pod: dict[str, Any]) -> str:
    """Why a pod is not running yet, in Kubernetes' words ('' when nothing says so)."""
    status = pod.get("status") or {}
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return f"{cond.get('reason', 'Unschedulable')}: {cond.get('message', '')}".rstrip(": ")
    waiting = (_container_status(pod).get("state") or {}).get("waiting") or {}
    if waiting.get("reason") in _STUCK_WAITING:
        return f"{waiting['reason']}: {waiting.get('message', '')}".rstrip(": ")
    return ""


def events_reason(events: list[dict[str, Any]]) -> str:
    """The newest Warning event's reason and message (FailedCreate from a quota, ...)."""
    warnings = [e for e in events if e.get("type") == "Warning"]
    if not warnings:
        return ""
    newest = max(warnings, key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")
    return f"{newest.get('reason', '')}: {newest.get('message', '')}".strip(": ")


def _when(stamp: object) -> datetime:
    return datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))


def deleted_before_it_ended(pod: dict[str, Any], term: dict[str, Any]) -> bool:
    """Someone deleted the pod (`kubectl delete pod`, a drain without eviction) before its grader ended on its
    own. The Job controller counts a terminating pod as failed at once, so its Job can be finished while the
    pod still runs or is being killed: such a pod neither "never ran" nor exited on its own. The deletion was
    asked for at deletionTimestamp minus the grace period; a grader that finished before then ended by itself."""
    meta = pod.get("metadata") or {}
    running = bool((_container_status(pod).get("state") or {}).get("running"))
    if not meta.get("deletionTimestamp") or not (running or term):
        return False  # not deleted, or deleted before its grader started (the Job's deadline): never ran
    if not term.get("finishedAt"):
        return True
    try:
        asked = _when(meta["deletionTimestamp"]).timestamp() - float(meta.get("deletionGracePeriodSeconds") or 0)
        return _when(term["finishedAt"]).timestamp() >= asked
    except ValueError:
        return True


def _millis(term: dict[str, Any]) -> int:
    try:
        start, end = _when(term["startedAt"]), _when(term["finishedAt"])
    except (KeyError, ValueError):
        return 0
    return max(0, int((end - start).total_seconds() * 1000))


def status_facts(job: dict[str, Any], pod: dict[str, Any] | None, *, test_id: str | None,
                 events: list[dict[str, Any]] | None = None) -> GraderFacts | None:  # fmt: skip
    """The facts when the Job's and pod's status alone decide (stopped, OOM, deadline, never ran);
    None when the grader exited on its own and its log holds the answer."""
    name = job["metadata"]["name"]
    failed = job_failed(job) or {}
    deactivated = kueue_deactivated(job)
    # Only a Job that never ended by itself: a grader's own end (its verdict) outranks what Kueue did later.
    if deactivated and not (failed or condition(job, "Complete")):
        said = f"job {name}: Kueue deactivated its Workload ({deactivated})"
        if pod is not None and (grader_terminated(pod) or "running" in (_container_status(pod).get("state") or {})):
            return GraderFacts(test_id=test_id, stopped_from_outside=True, detail=said)
        return GraderFacts(test_id=test_id, started=False, infra_reason=said)
    if pod is None:
        if failed and failed.get("reason") != "DeadlineExceeded":
            # The Job counted its pod as failed (backoffLimit 0), so a pod existed and was deleted or
            # ended: stopped from outside. A FailedScheduling event from before it ran is no reason.
            why = failed.get("reason") or "Failed"
            return GraderFacts(test_id=test_id, stopped_from_outside=True, detail=f"job {name}: pod gone ({why})")
        why = events_reason(events or []) or failed.get("message") or "its pod is gone"
        return GraderFacts(test_id=test_id, started=False, infra_reason=f"job {name}: no grader pod ran: {why}")
    pod_name = pod["metadata"]["name"]
    status = pod.get("status") or {}
    term = grader_terminated(pod)
    disruption = condition(pod, "DisruptionTarget")
    if disruption or status.get("reason") in _STOPPED_POD_REASONS:
        why = (disruption or {}).get("reason") or status.get("reason")
        return GraderFacts(test_id=test_id, stopped_from_outside=True, detail=f"pod {pod_name}: {why}")
    deleted = deleted_before_it_ended(pod, term)
    if not term and not deleted:
        why = waiting_reason(pod) or status.get("message") or failed.get("message") or "container never started"
        return GraderFacts(test_id=test_id, started=False, infra_reason=f"pod {pod_name} never ran: {why}")
    # What the candidate's own run caused (OOM, the pod's deadline) outranks a deletion that came after it.
    duration = _millis(term)
    if term.get("reason") == "OOMKilled":
        return GraderFacts(test_id=test_id, oom_killed=True, duration_ms=duration, detail=f"pod {pod_name}")
    if status.get("reason") == "DeadlineExceeded":
        # The grader's exit here is the deadline's SIGTERM/SIGKILL, not a signal from someone else.
        return GraderFacts(test_id=test_id, deadline_exceeded=True, duration_ms=duration, detail=f"pod {pod_name}")
    if failed.get("reason") == "DeadlineExceeded":
        # The Job's deadline (start allowance + the pod's) passed before the pod's own: it started late.
        return GraderFacts(test_id=test_id, stopped_from_outside=True, detail=f"job {name}: DeadlineExceeded")
    if deleted:
        return GraderFacts(test_id=test_id, stopped_from_outside=True, detail=f"pod {pod_name}: deleted while running")
    return None


def attempt_facts(
    job: dict[str, Any],
    pod: dict[str, Any] | None,
    *,
    test_id: str | None,
    log: bytes | None = None,
    log_error: str = "",
    events: list[dict[str, Any]] | None = None,
) -> GraderFacts:
    """What one finished attempt (a Job with backoffLimit 0, and its pod) saw.

    Args:
        log: the grader's log, read with `limitBytes = MAX_GRADER_OUTPUT_BYTES + 1`; None when the
            log could not be read (then `log_error` says why, after LOG_READ_TRIES reads).
        events: the Job's events, for the reason a pod was never created.
    """
    decided = status_facts(job, pod, test_id=test_id, events=events)
    if decided is not None or pod is None:
        assert decided is not None
        return decided
    pod_name = pod["metadata"]["name"]
    if log is None:
        reason = f"log of pod {pod_name} unreadable after {LOG_READ_TRIES} reads: {log_error}"
        if (pod.get("metadata") or {}).get("deletionTimestamp"):
            # It ran (status_facts saw it end) and someone deleted it; its log went with it. Once the kubelet's
            # final delete has shortened the grace to 0, deletionTimestamp no longer says when the deletion was
            # asked for, so deleted_before_it_ended cannot tell; either way the attempt was ended from outside.
            return GraderFacts(test_id=test_id, stopped_from_outside=True, detail=f"pod {pod_name} deleted; {reason}")
        return GraderFacts(test_id=test_id, started=False, infra_reason=reason)
    term = grader_terminated(pod)
    return GraderFacts(
        test_id=test_id,
        exit_code=term.get("exitCode"),
        stdout=log[:MAX_GRADER_OUTPUT_BYTES].decode("utf-8", "replace"),
        stdout_truncated=len(log) > MAX_GRADER_OUTPUT_BYTES,
        duration_ms=_millis(term),
        detail=f"pod {pod_name}",
    )


def log_limit(tasks: int) -> int:
    """The bytes of a grader's log that are read: each task's output cap, and one byte that says it was passed."""
    return MAX_GRADER_OUTPUT_BYTES * max(1, tasks) + 1


def sequence_facts(
    job: dict[str, Any],
    pod: dict[str, Any] | None,
    *,
    test_ids: list[str],
    log: bytes | None = None,
    log_error: str = "",
    events: list[dict[str, Any]] | None = None,
) -> list[GraderFacts]:
    """What one finished attempt of a pod grading several tasks in a sequence (`wpbench-grade --sequence`) saw,
    per task, in order: the facts of every task that answered (its verdict and end line are in the log), then of
    the one the pod was grading when it ended, if any. The tasks after it did not run in this attempt.

    A task that answered is judged by its own exit code and output alone, whatever ended the pod later. The task in
    progress gets what the pod's end says (`status_facts`: stopped, OOM, deadline) or, when the grader exited on
    its own, the exit code and what followed the last end line, exactly as a pod grading only it would. When the
    pod never ran a task, or its log is gone, nothing is known of any: the facts say so for the first task, and
    the caller charges every task of the attempt (`never_started`).

    Args:
        log: the grader's log, read with `limitBytes = log_limit(len(test_ids))`; None when unreadable.
    """
    first = test_ids[0] if test_ids else None
    decided = status_facts(job, pod, test_id=first, events=events)
    if pod is None or log is None or (decided is not None and not decided.started):
        return [attempt_facts(job, pod, test_id=first, log=log, log_error=log_error, events=events)]
    limit = log_limit(len(test_ids)) - 1
    answers, rest = split_sequence_output(log[:limit])
    pod_name = pod["metadata"]["name"]
    facts = [
        GraderFacts(
            test_id=test_id,
            exit_code=answer.exit_code,
            stdout=answer.output[:MAX_GRADER_OUTPUT_BYTES].decode("utf-8", "replace"),
            stdout_truncated=len(answer.output) > MAX_GRADER_OUTPUT_BYTES,
            detail=f"pod {pod_name}, task {n + 1} of a sequence",
        )
        for n, (test_id, answer) in enumerate(zip(test_ids, answers, strict=False))
    ]
    closed = bool(answers) and not answers[-1].ready
    if len(facts) >= len(test_ids) or closed:
        return facts  # every task answered, or the supervisor graded no more (the rest did not run)
    in_progress = test_ids[len(facts)]
    if decided is not None:
        return [*facts, decided.model_copy(update={"test_id": in_progress})]
    term = grader_terminated(pod)
    said = GraderFacts(
        test_id=in_progress,
        exit_code=term.get("exitCode"),
        stdout=rest[:MAX_GRADER_OUTPUT_BYTES].decode("utf-8", "replace"),
        stdout_truncated=len(rest) > MAX_GRADER_OUTPUT_BYTES or len(log) > limit,
        duration_ms=_millis(term),
        detail=f"pod {pod_name}, task {len(facts) + 1} of a sequence",
    )
    return [*facts, said]


def never_started(facts: list[GraderFacts]) -> bool:
    """The attempt ran no task at all (its one fact says the grader never started)."""
    return len(facts) == 1 and not facts[0].started


def newest(pods: list[dict[str, Any]]) -> dict[str, Any] | None:
    return max(pods, key=lambda p: p["metadata"].get("creationTimestamp") or "", default=None)


def read_log(kube: Kube, namespace: str, pod: str, *, tries: int = LOG_READ_TRIES, pause: float = 1.0,
             tasks: int = 1) -> tuple[bytes | None, str]:  # fmt: skip
    """At most `log_limit(tasks)` bytes of a grader's log, with a bounded number of reads."""
    error = ""
    for attempt in range(tries):
        try:
            return kube.log(namespace, pod, GRADER_CONTAINER, limit_bytes=log_limit(tasks)), ""
        except KubeError as exc:
            error = str(exc)
            if attempt + 1 < tries:
                time.sleep(pause)
    return None, error


def attempt_events(kube: Kube, namespace: str, job_name: str) -> list[dict[str, Any]]:
    """Why a Job's pod never ran, when the pod is gone: its own Warning events (FailedScheduling, ...),
    which outlive it, else the Job's (FailedCreate from a quota, DeadlineExceeded)."""
    try:
        pods = [e for e in kube.items(EVENTS, namespace, field_selector="involvedObject.kind=Pod")
                if str((e.get("involvedObject") or {}).get("name", "")).startswith(f"{job_name}-")]  # fmt: skip
        if events_reason(pods):
            return pods
        return kube.items(EVENTS, namespace, field_selector=f"involvedObject.name={job_name}")
    except KubeError:  # events are explanation only (a Role without them, an API server hiccup)
        return []
