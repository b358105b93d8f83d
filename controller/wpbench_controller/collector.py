"""From a finished grader Job to a record: read the verdict pod's log, validate, score.

The reading and classifying are the Kubernetes executor's (`job_outcome`, `read_verdict`): a local
`run --executor kubernetes` and the controller believe exactly the same things.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from kubernetes import client as k8s

from wpbench_controller.generation import Generated
from wpbench_k8s.dataset import ExecutionTest
from wpbench_k8s.errors import InputError
from wpbench_k8s.executor.base import Executor, GraderSpec
from wpbench_k8s.executor.kubernetes import JobOutcome, VerdictUnreadable, job_outcome, pod_log, read_verdict
from wpbench_k8s.manifest import ManifestItem, RunManifest
from wpbench_k8s.outcome import GraderFacts
from wpbench_k8s.pipeline import ItemGrader, judge_for, test_of
from wpbench_k8s.records import Record, Usage
from wpbench_k8s.scoring import build_record
from wpbench_runtime.contract import GradeTask

log = logging.getLogger(__name__)


@dataclass
class Collected:
    record: Record | None  # None: not finished yet, or the log could not be read this time
    outcome: JobOutcome


def infra_record(manifest: RunManifest, item: ManifestItem, outcome: JobOutcome, usage: Usage | None = None) -> Record:
    """The record of an item the infrastructure could not grade: reported, never scored."""
    attempts = outcome.retries + 1
    record = build_record(
        manifest,
        item,
        None,
        usage=usage,
        infra_retries=outcome.retries,
        infra=True,
        error=f"infra_error after {attempts} attempt{'s' if attempts > 1 else ''}: {outcome.reason}",
    )
    if outcome.timeout:
        record.grader.timeout = True
    return record


def collect(
    core: Any,
    namespace: str,
    manifest: RunManifest,
    item: ManifestItem,
    job: dict[str, Any],
    pods: list[dict[str, Any]],
    *,
    usage: Usage | None = None,
) -> Collected:
    """The record for a finished Job, or `record=None` while it runs (or its log is not readable yet)."""
    outcome = job_outcome(job, pods)
    if outcome.state == "running":
        return Collected(None, outcome)
    if outcome.state == "infra" or outcome.pod is None:
        return Collected(infra_record(manifest, item, outcome, usage), outcome)
    pod_name = outcome.pod["metadata"]["name"]
    try:
        text = pod_log(core, namespace, pod_name)
    except k8s.ApiException as exc:
        log.warning("log of %s/%s not readable yet (%s); will retry", namespace, pod_name, exc.status)
        return Collected(None, outcome)
    assert item.task is not None
    try:
        verdict = read_verdict(text, outcome.termination_message, test_id=item.task.test_id)
    except VerdictUnreadable as exc:
        outcome.reason = f"pod {pod_name}: {exc}"
        return Collected(infra_record(manifest, item, outcome, usage), outcome)
    record = build_record(manifest, item, verdict, usage=usage, infra_retries=outcome.retries)
    judge = judge_for(manifest)
    test = test_of(manifest, item.test_id)
    if judge is not None and item.candidate is not None and isinstance(test, ExecutionTest):
        record = judge.annotate(record, test, item.candidate)
    return Collected(record, outcome)


class _NoGrader(Executor):
    """Stands in for a backend where a record needs none (knowledge answers, unextractable code)."""

    name = "none"

    def preflight(self) -> GraderSpec:
        return self.spec

    def run_grader(self, task: GradeTask) -> GraderFacts:
        raise AssertionError(f"{task.test_id}: this item needs a grader pod")

    def cleanup(self) -> int:
        return 0


def record_without_pod(manifest: RunManifest, item: ManifestItem, generated: Generated | None = None) -> Record:
    """Knowledge items and unextractable completions: scored in the controller, exactly like a local run.

    For model items, `item` is the manifest's (no candidate) and `generated` replays the stored model
    call through the same `ItemGrader` the local run uses, so answers and usage are recorded alike.
    """
    replay = None
    if generated is not None:
        result = SimpleNamespace(
            candidate=generated.item.candidate, usage=generated.usage, error=generated.error, answer=generated.answer
        )
        replay = lambda *args: result  # noqa: E731
    try:
        return ItemGrader(manifest, _NoGrader(manifest.grader, manifest.run_id), generate=replay)(item)
    except (InputError, ImportError) as exc:
        usage = generated.usage if generated else None
        return build_record(manifest, item, None, usage=usage, error=f"not gradable: {exc}")
