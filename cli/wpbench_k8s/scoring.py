"""Verdict -> Record, and the aggregates of a run. Both paths (local and cluster) use these."""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from wpbench_k8s.manifest import ManifestItem, RunManifest
from wpbench_k8s.profiles import ProfileName, get_profile, is_upstream
from wpbench_k8s.records import Record, RecordGrader, RecordOutput, RecordScores, Usage
from wpbench_k8s.upstream_compat import upstream_answer
from wpbench_runtime.contract import Verdict


@dataclass(frozen=True)
class GraderVerdict:
    """A grader decided (scored; a `harness_error` verdict is excluded as the harness's)."""

    verdict: Verdict
    infra_retries: int = 0


@dataclass(frozen=True)
class KnowledgeAnswer:
    """A knowledge answer, scored by answer matching (step 3)."""

    score: float
    answer: str | None = None  # the text scored, when the candidate's raw output is not it


@dataclass(frozen=True)
class InfraFailure:
    """The infrastructure failed every attempt: status infra_error, retried and excluded."""

    reason: str
    infra_retries: int = 0


@dataclass(frozen=True)
class NotGraded:
    """Nothing reached a grader (a generation or provider error, an item that cannot be graded): excluded."""

    reason: str


RecordOutcome = GraderVerdict | KnowledgeAnswer | InfraFailure | NotGraded


def build_record(manifest: RunManifest, item: ManifestItem, outcome: RecordOutcome, *,
                 usage: Usage | None = None) -> Record:  # fmt: skip
    """The one place a record is made, from what became of the item (`RecordOutcome`).

    Raises:
        ValueError: an execution item with a knowledge answer (a caller's mistake, never the candidate's).
    """
    verdict = outcome.verdict if isinstance(outcome, GraderVerdict) else None
    answer = outcome.answer if isinstance(outcome, KnowledgeAnswer) else None
    error = outcome.reason if isinstance(outcome, (InfraFailure, NotGraded)) else None
    infra_retries = outcome.infra_retries if isinstance(outcome, (GraderVerdict, InfraFailure)) else 0
    if isinstance(outcome, KnowledgeAnswer) and item.test_type != "knowledge":
        raise ValueError(f"item {item.item_id}: an execution item is scored from a grader's verdict")
    test = manifest.tests.get(item.test_id, {})
    candidate = item.candidate
    upstream = is_upstream(manifest.profile)
    if upstream and verdict is not None:
        verdict = php_issues_as_error(verdict)
    raw = (candidate.raw if candidate else "") or (answer or "")
    output = RecordOutput(
        raw=raw,
        code=candidate.code if candidate else None,
        files=candidate.files if candidate else None,
        extraction_error=candidate.extraction_error if candidate else None,
        raw_completion=(candidate.raw if candidate and candidate.raw else None) or answer,
        answer=_stored_answer(raw, manifest.profile) if item.test_type == "knowledge" else None,
    )
    if item.test_type == "knowledge":
        score = outcome.score if isinstance(outcome, KnowledgeAnswer) else 0.0
        scores = RecordScores(
            correctness=score, execution_pass=score >= 1.0, runtime=score, static=0.0, knowledge=score
        )
        grader = RecordGrader(status="not_graded", reason="knowledge test: scored by answer matching")
    elif verdict is None:
        scores = RecordScores()
        grader = RecordGrader(
            status="infra_error" if isinstance(outcome, InfraFailure) else "not_graded",
            reason=error or "no verdict",
            infra_retries=infra_retries,
        )
    else:
        scores = RecordScores(
            correctness=_correctness(verdict, upstream=upstream),
            execution_pass=verdict.scores.execution_pass,
            runtime=verdict.scores.runtime,
            # Upstream zeroes its static score when an error-severity forbidden pattern matches.
            static=0.0 if upstream and not verdict.scores.static_policy_pass else verdict.scores.static,
            static_policy_pass=verdict.scores.static_policy_pass,
        )
        grader = RecordGrader(
            status=verdict.status,
            reason=verdict.reason,
            stdout=verdict.stdout,
            stderr=verdict.stderr,
            timeout=verdict.status == "timeout",
            duration_ms=verdict.duration_ms,
            infra_retries=infra_retries,
            verdict=verdict,
            success=verdict.scores.execution_pass and verdict.scores.static >= 0.999,
        )
        if verdict.status == "harness_error" and error is None:
            error = f"harness_error: {verdict.reason}"
    usage = usage or Usage()
    model = next((m for m in manifest.models if m.name == item.model), None)
    return Record(
        run_id=manifest.run_id,
        item_id=item.item_id,
        test_id=item.test_id,
        suite=manifest.suite,
        type=item.test_type,
        category=str(test.get("category", "")),
        difficulty=str(test.get("difficulty", "")),
        mode=manifest.mode,
        variant=item.variant,
        prompt_hash=item.prompt_hash,
        model=item.model,
        output=output,
        scores=scores,
        grader=grader,
        usage=usage.model_copy(update={"total_tokens": usage.prompt_tokens + usage.completion_tokens}),
        error=error,
        error_type=_error_type(error, grader.status),
        profile=manifest.profile,
        model_settings=None
        if model is None
        else {"name": model.name, "kind": model.kind, "temperature": model.temperature, "top_p": model.top_p,
              "max_tokens": model.max_tokens},
    )  # fmt: skip


def _error_type(error: str | None, status: str) -> str | None:
    if error is None:
        return None
    if status in ("harness_error", "infra_error"):
        return status
    return "model_error"


def _stored_answer(raw: str, profile: str) -> str:
    """A knowledge record's `output.answer`: upstream strips one outer fence; ours keeps the reply."""
    return upstream_answer(raw) if is_upstream(profile) else raw


# PHP issue levels upstream's error handler turns into exceptions (with WP_DEBUG on, _doing_it_wrong()
# and deprecation notices arrive as E_USER_NOTICE / E_USER_DEPRECATED, so they count too).
_UPSTREAM_ERROR_LEVELS = ("Warning", "Notice", "Deprecated", "Unknown error")
# Upstream installs its handler after boot and ignores anything its teardown throws.
_UPSTREAM_IGNORED_PHASES = ("boot", "teardown")


def php_issues_as_error(verdict: Verdict) -> Verdict:
    """Upstream profile: a PHP warning, notice or deprecation is an exception.

    Raised in setup or candidate code (or where the grader did not say), it is an execution error:
    status `error`, nothing passes, runtime 0. Raised inside an assertion, that assertion fails
    and the others keep their result, as upstream catches exceptions per assertion.
    """
    issues = [
        i for i in verdict.php_issues if i.level in _UPSTREAM_ERROR_LEVELS and i.phase not in _UPSTREAM_IGNORED_PHASES
    ]
    if not issues or verdict.status not in ("passed", "failed"):
        return verdict
    note = "(upstream profile: PHP notices, warnings and deprecations are errors)"
    in_assertions: dict[int, str] = {}
    for issue in issues:
        index = issue.phase.removeprefix("assertion:")
        if not issue.phase.startswith("assertion:") or not index.lstrip("-").isdigit():
            return verdict.model_copy(
                update={
                    "status": "error",
                    "reason": f"PHP {issue.level}: {issue.message} {note}",
                    "scores": verdict.scores.model_copy(update={"execution_pass": False, "runtime": 0.0}),
                }
            )
        in_assertions.setdefault(int(index), f"PHP {issue.level}: {issue.message}")
    assertions = [
        a.model_copy(update={"passed": False, "message": f"{in_assertions[a.index]} {note}"})
        if a.index in in_assertions
        else a
        for a in verdict.assertions
    ]
    scored = [a for a in assertions if a.scored]
    total = sum(a.weight for a in scored)
    runtime = round(sum(a.weight for a in scored if a.passed) / total, 6) if total > 0 else 0.0
    first = min(in_assertions)
    return verdict.model_copy(
        update={
            "status": "failed",
            "reason": f"assertion #{first}: {in_assertions[first]} {note}",
            "assertions": assertions,
            "scores": verdict.scores.model_copy(update={"execution_pass": False, "runtime": runtime}),
        }
    )


def _correctness(verdict: Verdict, *, upstream: bool = False) -> float:
    """Scoring v2.0: runtime weight share, zeroed by a crash, a timeout or an error-severity forbidden
    pattern (upstream keeps the runtime share on a forbidden-pattern hit; the pass still fails)."""
    if verdict.status not in ("passed", "failed"):
        return 0.0
    if not verdict.scores.static_policy_pass and not upstream:
        return 0.0
    return verdict.scores.runtime


def counted(records: Iterable[Record]) -> list[Record]:
    """Records that enter aggregates: errored, infra-failed and harness-errored ones do not."""
    return [r for r in records if r.error is None and r.grader.status not in ("infra_error", "harness_error")]


def _mean(values: list[float]) -> float:
    return round(statistics.fmean(values), 4) if values else 0.0


def aggregate(records: list[Record]) -> dict[str, Any]:
    """Scores for one group of records (one model x variant)."""
    good = counted(records)
    execution = [r for r in good if r.type == "execution"]
    knowledge = [r for r in good if r.type == "knowledge"]
    by_category: dict[str, list[Record]] = defaultdict(list)
    for r in good:
        by_category[r.category].append(r)
    return {
        "records": len(records),
        "counted": len(good),
        "excluded": len(records) - len(good),
        "score": _mean([r.scores.correctness for r in good]),
        "scores": headline_scores(execution, knowledge, profile=_group_profile(records)),
        "execution": {
            "tests": len(execution),
            "passed": sum(r.scores.execution_pass for r in execution),
            "pass_rate": _mean([float(r.scores.execution_pass) for r in execution]),
            "runtime_score": _mean([r.scores.runtime for r in execution]),
            "static_score": _mean([r.scores.static for r in execution]),
        },
        "knowledge": {
            "tests": len(knowledge),
            "correct": sum(r.scores.correctness >= 1.0 for r in knowledge),
            "accuracy": _mean([r.scores.correctness for r in knowledge]),
        },
        "categories": {
            cat: {
                "tests": len(rs),
                "passed": sum(r.scores.execution_pass for r in rs),
                "score": _mean([r.scores.correctness for r in rs]),
            }
            for cat, rs in sorted(by_category.items())
        },
        "statuses": dict(sorted(Counter(r.grader.status for r in records).items())),
        "cost_usd": round(sum(r.usage.cost_usd for r in records), 6),
        "latency_ms_mean": _mean([float(r.usage.latency_ms) for r in records if r.usage.calls]),
    }


def group_name(model: str, variant: str) -> str:
    """The summary's `models` key of a model and variant."""
    return model if variant == "baseline" else f"{model} [{variant}]"


def _mean_or_none(values: list[float]) -> float | None:
    return round(statistics.fmean(values), 4) if values else None


def _exact_mean(values: list[float]) -> float | None:
    # Upstream's statistics.mean, unrounded (0.721875 stays 0.721875).
    return statistics.mean(values) if values else None


def _rate4(values: list[float]) -> float | None:
    # Upstream rounds its pass rates and runtime mean to 4 places.
    return round(sum(values) / len(values), 4) if values else None


def _group_profile(records: list[Record]) -> ProfileName:
    return next((r.profile for r in records if is_upstream(r.profile)), "wpbench")


def headline_scores(execution: list[Record], knowledge: list[Record], *, profile: ProfileName) -> dict[str, Any]:
    """The summary's `scores` block, by the profile's scoring rules; `overall` is the headline.

    - upstream (scoring v3.0): `correctness` (unrounded mean), `execution_pass_rate`, `runtime`,
      `static_policy_pass_rate` (each rounded to 4 places), `overall` = the pass rate (0.0 when nothing
      was graded); knowledge is outside it.
    - upstream-v2 (scoring v2.0): the same plus `knowledge` (unrounded mean); `overall` =
      0.3 x knowledge + 0.7 x execution_pass_rate over the tracks present, rounded to 4 places.
    - wpbench: `overall` is our mean correctness over every counted record (execution and knowledge).
    Every profile also writes `knowledge` (null without knowledge records) and `execution_pass` (our
    name for the pass rate) so a reader of either shape finds its keys.
    """
    passes = [float(r.scores.execution_pass) for r in execution]
    scoring = get_profile(profile).scoring
    if scoring == "wpbench":
        overall = _mean_or_none([r.scores.correctness for r in [*execution, *knowledge]])
        return {
            "knowledge": _mean_or_none([r.scores.correctness for r in knowledge]),
            "correctness": _mean_or_none([r.scores.correctness for r in execution]),
            "execution_pass": _mean_or_none(passes),
            "overall": overall if overall is not None else 0.0,
        }
    scores: dict[str, Any] = {
        "knowledge": _exact_mean([r.scores.correctness for r in knowledge]),
        "correctness": _exact_mean([r.scores.correctness for r in execution]),
        "execution_pass_rate": _rate4(passes),
        "runtime": _rate4([r.scores.runtime for r in execution]),
        "static_policy_pass_rate": _rate4([float(r.scores.static_policy_pass) for r in execution]),
    }
    scores["execution_pass"] = scores["execution_pass_rate"]
    if scoring == "3.0":
        rate = scores["execution_pass_rate"]
        scores["overall"] = round(rate, 4) if rate is not None else 0.0
        return scores
    weights = {"knowledge": 0.3, "execution_pass_rate": 0.7}
    active = {k: w for k, w in weights.items() if scores[k] is not None}
    total = sum(scores[k] * w for k, w in active.items())
    scores["overall"] = round(total / sum(active.values()), 4) if active else 0.0
    return scores


def group_key(record: Record) -> str:
    return group_name(record.model, record.variant)


def aggregate_by_model(records: list[Record]) -> dict[str, dict[str, Any]]:
    groups: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        groups[group_key(r)].append(r)
    return {key: aggregate(rs) for key, rs in groups.items()}
