"""What a grader run means — decided once, for every backend.

Backends observe different things (Docker: exit code, stdout, the OOM flag; Kubernetes: pod status,
the pod log, the DisruptionTarget condition, the active deadline; never the termination message, a
file any process in the container may write). Each reduces what it saw
to `GraderFacts` and calls `decide_outcome()`. The pipeline's single retry layer retries `Infra`
decisions; when the retry budget is spent, `settle()` records the decision's fallback verdict (the
candidate's scored failure) when it has one, else infra_error (excluded from aggregates).

The rules, in order (the threat model is in docs/architecture.md):
 1. The grader never ran (create, start, schedule or image pull failed; engine unreachable; the
    output could not be read back)                                         -> Infra, no fallback.
 2. Stopped from outside the sandbox (engine or kubelet stop, eviction, node lost; the supervisor
    exits STOPPED_EXIT_CODE when a signal comes from outside the container)  -> Infra, no fallback.
 2b. The egress gate: the supervisor exits EGRESS_OPEN_EXIT_CODE when the backend asked it to see the
    network closed before reading the task and it was not within the bound (Kubernetes: the pod's
    deny-all NetworkPolicy not programmed yet); the candidate never ran     -> Infra, no fallback.
 3. Ended by something the candidate can cause itself: the whole container OOM-killed, the outer
    deadline passed                         -> Infra with a fallback: retried, then scored as failure.
 4. A well-formed verdict for this test:
      harness_error with TASK_BROKEN_EXIT_CODE (the supervisor found the task broken before any
      candidate code ran)                                                  -> HarnessBroken (excluded);
      any other harness_error (it happened once candidate code could act)   -> Scored as error;
      an error verdict with VERIFIER_FAILED_EXIT_CODE                      -> Scored as written;
      passed / failed / error / timeout                                     -> Scored.
 5. Anything else once the grader ran (no verdict, malformed, oversized, another test's, a
    verdict channel that disagrees)                                         -> Scored as error.
Nothing the candidate can do reaches rule 1 or 2 (the gate of 2b runs before the task is read), so nothing it
does leaves the scored set.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from wpbench_runtime.contract import Scores, Verdict, VerdictStatus

# Exit codes of `wpbench-grade` (see wpbench_runtime.contract): 0 verdict, 2 task broken before the
# candidate ran, 3 the verifier failed once candidate code could act (an `error` verdict), 4 stopped by
# a signal from outside the container (the runner's seccomp filter refuses signals to other processes,
# so nothing inside can send one), 5 the egress gate (below). Anything else is rule 5.
TASK_BROKEN_EXIT_CODE = 2
VERIFIER_FAILED_EXIT_CODE = 3
STOPPED_EXIT_CODE = 4
# 5: the egress gate (runtime/php/verifier/supervisor/egress.php) did not see the network closed, before the
# task was read: no candidate code ran. Records and retries name it by EGRESS_OPEN.
EGRESS_OPEN_EXIT_CODE = 5
EGRESS_OPEN = "egress_open"
# The most grader stdout a backend keeps; a verdict is far smaller (its output fields are capped).
MAX_GRADER_OUTPUT_BYTES = 8 * 1024 * 1024
_TAIL = 65536
# How often an infrastructure failure is tried again before the item is recorded as infra_error: one budget for
# both backends (a local run's attempts and a grader Job's retries), so a run's numbers do not depend on where it ran.
INFRA_RETRIES = 2


class GraderFacts(BaseModel):
    """What a backend saw of one grader attempt, before any interpretation."""

    model_config = ConfigDict(frozen=True)

    test_id: str | None = None
    started: bool = True  # False: the grader never ran (rule 1)
    infra_reason: str = ""  # why it never ran / why its output is unavailable
    stopped_from_outside: bool = False  # eviction, engine or kubelet stop, node lost (rule 2)
    oom_killed: bool = False  # the whole container was OOM-killed (rule 3)
    deadline_exceeded: bool = False  # the backend's outer deadline passed (rule 3)
    exit_code: int | None = None
    stdout: str = ""  # the grader's stdout (Kubernetes: the pod log), bounded by the backend
    stdout_truncated: bool = False  # the backend dropped output past MAX_GRADER_OUTPUT_BYTES
    stderr: str = ""
    duration_ms: int = 0
    detail: str = ""  # backend words for the reason (pod name, container state, ...)


@dataclass(frozen=True)
class Scored:
    verdict: Verdict


@dataclass(frozen=True)
class HarnessBroken:
    verdict: Verdict


@dataclass(frozen=True)
class Infra:
    reason: str
    fallback: Verdict | None = None  # what the record says once retries are spent (None: infra_error)


Decision = Scored | HarnessBroken | Infra


def candidate_failure(facts: GraderFacts, status: VerdictStatus, reason: str) -> Verdict:
    """A verdict charged to the candidate for something seen from outside the grader."""
    return Verdict(
        test_id=facts.test_id,
        status=status,
        reason=reason,
        scores=Scores(execution_pass=False, runtime=0.0, static=0.0, static_policy_pass=False),
        stderr=facts.stderr[-_TAIL:],
        duration_ms=facts.duration_ms,
    )


def _detail(facts: GraderFacts) -> str:
    return f" ({facts.detail})" if facts.detail else ""


def _egress_said(facts: GraderFacts) -> str:
    """What the gate said (its verdict's reason, printed before any candidate code ran), else a generic line."""
    try:
        said = parse_verdict(facts.stdout, test_id=facts.test_id).reason
    except UnreadableVerdict:
        said = ""
    said = said.removeprefix(f"{EGRESS_OPEN}: ")
    return said[:500] or "the grader's network was not seen closed before the task was read; no candidate code ran"


def decide_outcome(facts: GraderFacts) -> Decision:
    """Apply the module's rules to one attempt's facts."""
    if not facts.started:
        return Infra(f"grader did not run: {facts.infra_reason or 'unknown'}{_detail(facts)}")
    if facts.stopped_from_outside or facts.exit_code == STOPPED_EXIT_CODE:
        return Infra(f"grader stopped from outside the sandbox{_detail(facts)}")
    if facts.exit_code == EGRESS_OPEN_EXIT_CODE:
        return Infra(f"{EGRESS_OPEN}: {_egress_said(facts)}{_detail(facts)}")
    if facts.oom_killed:
        reason = f"grader container killed at its memory limit (OOM){_detail(facts)}"
        return Infra(reason, candidate_failure(facts, "error", reason))
    if facts.deadline_exceeded:
        reason = f"grader ran past the backend's outer deadline{_detail(facts)}"
        return Infra(reason, candidate_failure(facts, "timeout", reason))
    if facts.stdout_truncated:
        return Scored(candidate_failure(facts, "error", "grader output exceeded the backend's cap"))
    try:
        verdict = parse_verdict(facts.stdout, test_id=facts.test_id)
    except UnreadableVerdict as exc:
        return Scored(candidate_failure(facts, "error", f"no trustworthy verdict (exit {facts.exit_code}): {exc}"))
    if verdict.status == "harness_error":
        if facts.exit_code == TASK_BROKEN_EXIT_CODE:
            return HarnessBroken(verdict)
        reason = f"grader failed once candidate code could act: {verdict.reason}"
        return Scored(candidate_failure(facts, "error", reason))
    if facts.exit_code == VERIFIER_FAILED_EXIT_CODE and verdict.status == "error":
        return Scored(verdict)  # the supervisor already charged it to the candidate, with its reason
    if facts.exit_code != 0:
        reason = f"grader exit {facts.exit_code} with a {verdict.status} verdict"
        return Scored(candidate_failure(facts, "error", reason))
    return Scored(verdict)


def settle(decision: Decision) -> Verdict | None:
    """The verdict a record carries once no retry is left: None means infra_error (excluded)."""
    if isinstance(decision, Infra):
        return decision.fallback
    return decision.verdict


# ---- reading a verdict ------------------------------------------------------------------------
class UnreadableVerdict(Exception):
    """The grader's output holds no trustworthy verdict."""


def _last_json_object(text: str) -> dict[str, Any] | None:
    text = text.strip()
    if text.startswith("{"):
        try:
            whole = json.loads(text)
            if isinstance(whole, dict):
                return whole
        except json.JSONDecodeError:
            pass
    # A pod log interleaves stdout and stderr: the verdict is the last JSON object line. Lines end at
    # "\n" only (U+2028 in candidate output is no line break).
    for line in reversed(text.split("\n")):
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                doc = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(doc, dict) and "status" in doc:
                return doc
    return None


def parse_verdict(output: str, *, test_id: str | None = None) -> Verdict:
    """The verdict in a grader's output, validated against the contract.

    Only the supervisor's stdout counts. Kubernetes' termination message is never read: the file
    behind it (`/dev/termination-log`) is open to every process in the container, so it could only
    echo what a channel the candidate cannot write already says.

    Raises:
        UnreadableVerdict: no verdict, an invalid one, or another test's.
    """
    doc = _last_json_object(output)
    if doc is None:
        raise UnreadableVerdict(f"no verdict JSON in {len(output)} bytes of output")
    try:
        verdict = Verdict.model_validate(doc)
    except ValidationError as exc:
        raise UnreadableVerdict(f"verdict does not match the contract: {exc.errors()[0]['msg']}") from exc
    if test_id is not None and verdict.test_id not in (None, test_id):
        raise UnreadableVerdict(f"verdict is for test {verdict.test_id!r}, expected {test_id!r}")
    return verdict
