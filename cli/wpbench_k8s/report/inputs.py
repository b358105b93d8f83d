"""What the report reads: a run's summary JSON (validated by the models below) and the records JSONL
beside it. The models name only the fields the report shows and allow everything else, so a summary
that gains fields still loads; a summary that lacks or mistypes one is an InputError naming the file
and the field."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from wpbench_k8s.dataset import load_suite
from wpbench_k8s.errors import InputError, first_error
from wpbench_k8s.records import Record
from wpbench_k8s.textsafe import decode_utf8


class _Doc(BaseModel):
    model_config = ConfigDict(extra="allow")


class RunMetadata(_Doc):
    run_id: str
    suite: str
    mode: str
    tool: str = ""
    executor: str = ""
    runtime_isolation_boundary: str = ""
    runtime_image: str = ""
    runtime_image_id: str = ""
    scoring_version: str = ""
    profile: str = ""
    profile_reproduces: str = ""
    seed: int | None = None
    selected_test_ids: list[str] = Field(default_factory=list)
    dataset_source: str = ""
    dataset_digest: str = ""
    manifest_digest: str = ""
    models: list[str] = Field(default_factory=list)
    skills: list[dict[str, Any]] = Field(default_factory=list)
    started_at: str = ""
    finished_at: str = ""


class ExecutionAggregate(_Doc):
    tests: int = 0
    passed: int = 0
    pass_rate: float = 0.0


class KnowledgeAggregate(_Doc):
    tests: int = 0
    correct: int = 0
    accuracy: float = 0.0


class CategoryAggregate(_Doc):
    tests: int = 0
    score: float | None = None


class HeadlineScores(_Doc):
    """`scoring.headline_scores`: upstream's `scores` block; `overall` is the run's headline number."""

    overall: float
    execution_pass: float | None = None
    correctness: float | None = None
    knowledge: float | None = None


class GroupAggregate(_Doc):
    """`scoring.aggregate`: one model x variant (or the whole run)."""

    records: int
    counted: int
    excluded: int
    score: float
    scores: HeadlineScores | None = None  # summaries before the upstream profile have none
    execution: ExecutionAggregate
    knowledge: KnowledgeAggregate
    categories: dict[str, CategoryAggregate] = Field(default_factory=dict)
    statuses: dict[str, int] = Field(default_factory=dict)
    cost_usd: float = 0.0
    latency_ms_mean: float | None = None


class ComparisonRow(_Doc):
    """`models.compare.model_row`."""

    model: str
    variant: str
    runs: int = 1
    tests: int = 0
    excluded: int = 0
    score: float | None = None
    score_std: float | None = None
    pass_rate: float | None = None
    pass_rate_std: float | None = None
    quality: float | None = None
    cost_usd: float = 0.0
    latency_ms_mean: float | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    retries: int = 0
    errors: dict[str, int] = Field(default_factory=dict)
    categories: dict[str, CategoryAggregate] = Field(default_factory=dict)


class SkillsDelta(_Doc):
    model: str
    paired_tests: int = 0
    score: float | None = None
    pass_rate: float | None = None
    quality: float | None = None
    cost_usd: float | None = None
    latency_ms_mean: float | None = None


class Comparison(_Doc):
    rows: list[ComparisonRow]
    skills_delta: list[SkillsDelta] = Field(default_factory=list)
    categories: list[str] = Field(default_factory=list)


class ImpactTest(_Doc):
    test_id: str
    category: str = ""
    change: str
    baseline: float
    with_skills: float


class ImpactModel(_Doc):
    model: str
    tests_compared: int = 0
    counts: dict[str, int] = Field(default_factory=dict)
    tests: list[ImpactTest] = Field(default_factory=list)


class SkillImpact(_Doc):
    models: list[ImpactModel] = Field(default_factory=list)


class Summary(_Doc):
    """The summary JSON of `wpbench-k8s run` / `results` (`outputs.summarize` + `runner.mode_sections`)."""

    metadata: RunMetadata
    overall: GroupAggregate
    models: dict[str, GroupAggregate]
    comparison: Comparison | None = None
    skill_impact: SkillImpact | None = None


@dataclass
class RunInput:
    """One run as the report sees it: its summary, its records (when the JSONL is there) and the
    prompts of its tests (when the suite it ran is at hand). `notes` say what is missing and why."""

    path: Path
    summary: Summary
    records: list[Record] | None
    prompts: dict[str, str]
    notes: list[str] = field(default_factory=list)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror}") from exc
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise InputError(f"{path}: not a summary JSON document ({exc})") from exc


def load_summary(path: Path) -> Summary:
    doc = _read_json(path)
    if not isinstance(doc, dict):
        raise InputError(f"{path}: not a summary JSON document (expected an object)")
    try:
        return Summary.model_validate(doc)
    except ValidationError as exc:
        where, message = first_error(exc)
        raise InputError(f"{path}, field {where}: {message}") from exc


def load_records(path: Path) -> list[Record]:
    records = []
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror}") from exc
    for number, line in enumerate(decode_utf8(data, str(path)).split("\n"), 1):
        if not line.strip():
            continue
        try:
            records.append(Record.model_validate_json(line))
        except ValidationError as exc:
            where, message = first_error(exc)
            raise InputError(f"{path}, line {number}, field {where}: {message}") from exc
    return records


def records_path(summary_path: Path) -> Path:
    """Where a run keeps its records: the summary's name with .jsonl (local runs and `results` alike)."""
    return summary_path.with_suffix(".jsonl")


def suite_prompts(summary: Summary, dataset_path: Path | None) -> tuple[dict[str, str], str | None]:
    """Prompts of the run's tests from its suite, and a note when they cannot be shown. The suite
    must be the one that ran (same digest); an explicit `dataset_path` that does not load is an error."""
    meta = summary.metadata
    source = dataset_path or (Path(meta.dataset_source) if meta.dataset_source else None)
    if source is None or not source.exists():
        return {}, f"prompts not shown: suite {meta.suite} not found at {source or '(no dataset_source)'}"
    try:
        suite = load_suite(source, meta.suite)
    except InputError:
        if dataset_path is not None:
            raise
        return {}, f"prompts not shown: suite at {source} does not load"
    if meta.dataset_digest and suite.digest != meta.dataset_digest:
        return {}, (
            f"prompts not shown: suite at {source} has digest {suite.digest[:19]}, the run {meta.dataset_digest[:19]}"
        )
    return {t.id: t.prompt for t in suite.all_tests()}, None


def load_run(
    path: Path,
    *,
    prompts: dict[str, str] | None = None,
    records: Path | None = None,
    dataset_path: Path | None = None,
) -> RunInput:
    """A summary JSON and what lies beside it. `prompts` (from a manifest in hand) win over the suite."""
    summary = load_summary(path)
    notes: list[str] = []
    jsonl = records or records_path(path)
    loaded = load_records(jsonl) if jsonl.is_file() else None
    if loaded is None:
        notes.append(f"records not found at {jsonl}: no per-test drill-down, no difficulty breakdown")
    if prompts is None:
        prompts, note = suite_prompts(summary, dataset_path)
        if note:
            notes.append(note)
    return RunInput(path=path, summary=summary, records=loaded, prompts=prompts, notes=notes)
