"""The steps that turn one manifest item into one record, each on its own.

1. generate: model items only; a `Generator` writes the candidate
   (`wpbench_k8s.models.generate.generate_for_item`, which the controller calls too).
2. grade: execution items with something gradable; the executor runs the task and infrastructure
   failures are retried (`grade_with_retries`; the controller runs its attempts as Jobs instead).
3. score: `score_item`, pure; a knowledge answer is scored (here only), an unextractable completion
   fails, a grader decision is settled (`outcome.settle`). The local run and the controller call it.
4. judge: `judge_record`; the optional AI judge annotates a graded execution record.

`pipeline.ItemGrader` runs them in this order for a local run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from tenacity import RetryCallState, Retrying, retry_if_result, wait_exponential

from wpbench_k8s.dataset import AnyTest, ExecutionTest, KnowledgeTest, test_from_dict
from wpbench_k8s.errors import InputError
from wpbench_k8s.manifest import Candidate, ManifestItem, RunManifest
from wpbench_k8s.outcome import INFRA_RETRIES, Decision, GraderFacts, Infra, decide_outcome, settle
from wpbench_k8s.records import Record, Usage
from wpbench_k8s.scoring import GraderVerdict, InfraFailure, KnowledgeAnswer, NotGraded, build_record
from wpbench_runtime.contract import GradeTask, Scores, Verdict

INFRA_ATTEMPTS = 1 + INFRA_RETRIES
Graded = tuple[Decision, int]  # the last attempt's decision and how many retries came before it


class GraderRunner(Protocol):
    """What step 2 needs of an executor (`executor.base.Executor` is one): one attempt in a fresh grader,
    reported uninterpreted, and whether its engine answers now (`pipeline.EngineWait` polls it)."""

    def run_grader(self, task: GradeTask) -> GraderFacts: ...

    def engine_ready(self) -> bool: ...


def test_of(manifest: RunManifest, test_id: str) -> AnyTest:
    return test_from_dict(manifest.tests[test_id])


def grade_with_retries(
    executor: GraderRunner,
    task: GradeTask,
    *,
    attempts: int = INFRA_ATTEMPTS,
    engine_wait: Callable[[], bool] | None = None,
) -> Graded:
    """Step 2: run the task, retrying infrastructure failures (the local run's only retry layer).

    Args:
        engine_wait: called after each infrastructure failure; True refunds the attempt (the engine
            was down, `pipeline.EngineWait`).
    Returns:
        The last attempt's decision and how many retries it took; `score_item` settles it.
    """
    refunded = 0

    def spent(state: RetryCallState) -> bool:
        # Attempts that met an engine outage are not counted; EngineWait's budget bounds them.
        nonlocal refunded
        if engine_wait is not None and engine_wait():
            refunded += 1
        return state.attempt_number - refunded >= attempts

    retrying = Retrying(
        stop=spent,
        retry=retry_if_result(lambda decision: isinstance(decision, Infra)),
        wait=wait_exponential(multiplier=0.5, max=4),
        retry_error_callback=lambda state: state.outcome.result() if state.outcome else None,
    )
    decision: Decision = retrying(lambda: decide_outcome(executor.run_grader(task)))
    return decision, retrying.statistics.get("attempt_number", 1) - 1


def _unextractable(task: GradeTask, reason: str) -> Verdict:
    return Verdict(
        test_id=task.test_id,
        status="failed",
        reason=f"nothing gradable in the completion: {reason}",
        scores=Scores(execution_pass=False, runtime=0.0, static=0.0, static_policy_pass=True),
    )


def score_item(
    manifest: RunManifest,
    item: ManifestItem,
    graded: Graded | None = None,
    *,
    usage: Usage | None = None,
    answer: str | None = None,
    error: str | None = None,
) -> Record:
    """Step 3: the item's record from what the earlier steps gave. Pure: calls no model and no grader.

    Args:
        item: the item with its candidate (from the manifest or step 1).
        graded: step 2's outcome; required when `item.needs_grader`.
        usage, answer, error: step 1's usage, knowledge answer text and provider error.
    Raises:
        InputError: the item has no candidate, no error says why and no grader decided.
    """
    if error is not None:
        return build_record(manifest, item, NotGraded(error), usage=usage)
    if item.candidate is None and graded is None:
        raise InputError(f"item {item.item_id}: no candidate")
    if item.test_type == "knowledge":
        assert item.candidate is not None
        from wpbench_k8s.models.knowledge import score_for_profile

        test = test_of(manifest, item.test_id)
        assert isinstance(test, KnowledgeTest)
        if item.candidate.extraction_error:  # an answer no file can hold as written scores nothing
            return build_record(manifest, item, KnowledgeAnswer(0.0, item.candidate.raw), usage=usage)
        text = answer if answer is not None else item.candidate.raw
        scored = score_for_profile(test, text, manifest.profile)
        return build_record(manifest, item, KnowledgeAnswer(scored.score, text), usage=usage)
    assert item.task is not None
    if item.candidate is not None and item.candidate.extraction_error:
        unextractable = _unextractable(item.task, item.candidate.extraction_error)
        return build_record(manifest, item, GraderVerdict(unextractable), usage=usage)
    if graded is None:
        raise AssertionError(f"item {item.item_id}: an execution candidate is scored from a grader's decision")
    decision, retries = graded
    verdict = settle(decision)
    if verdict is None:
        reason = decision.reason if isinstance(decision, Infra) else "no verdict"
        failure = InfraFailure(f"infra_error after {retries + 1} attempts: {reason}", retries)
        return build_record(manifest, item, failure, usage=usage)
    return build_record(manifest, item, GraderVerdict(verdict, retries), usage=usage)


class RecordJudge(Protocol):
    """What step 4 needs of a judge (`models.judge.Judge`): a graded record in, the same record annotated out."""

    def annotate(self, record: Record, test: ExecutionTest, candidate: Candidate) -> Record: ...


def judge_record(judge: RecordJudge | None, manifest: RunManifest, item: ManifestItem, record: Record) -> Record:
    """Step 4: the optional AI judge (`models.judge.Judge`) annotates a graded execution record
    (`scores.quality`, `record.judge`); anything else comes back unchanged."""
    if judge is None or not item.needs_grader or record.grader.verdict is None:
        return record
    test = test_of(manifest, item.test_id)
    assert isinstance(test, ExecutionTest) and item.candidate is not None
    return judge.annotate(record, test, item.candidate)
