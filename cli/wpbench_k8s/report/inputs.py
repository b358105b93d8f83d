"""What the report reads: a run's summary JSON (validated as `wpbench_k8s.summary.RunSummary`, the model
the run wrote it from) and the records JSONL beside it. Unknown keys are allowed, so a summary that gains
fields still loads; one that lacks or mistypes a field is an InputError naming the file and the field."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from wpbench_k8s.dataset import load_suite
from wpbench_k8s.errors import InputError, first_error
from wpbench_k8s.records import Record
from wpbench_k8s.summary.model import RunSummary
from wpbench_k8s.textsafe import decode_utf8


@dataclass
class RunInput:
    """One run as the report sees it: its summary, its records (when the JSONL is there) and the
    prompts of its tests (when the suite it ran is at hand). `notes` say what is missing and why."""

    path: Path
    summary: RunSummary
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


def load_summary(path: Path) -> RunSummary:
    doc = _read_json(path)
    if not isinstance(doc, dict):
        raise InputError(f"{path}: not a summary JSON document (expected an object)")
    try:
        return RunSummary.model_validate(doc)
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


def suite_prompts(summary: RunSummary, dataset_path: Path | None) -> tuple[dict[str, str], str | None]:
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
