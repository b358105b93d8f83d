"""The report's content, computed once from the runs' summaries and records.

Every number comes from a summary JSON (`scoring.aggregate` per model, `compare.model_row` and the
Δ skills / Skill Impact sections), except the difficulty breakdown, which calls `scoring.aggregate`
itself on each model's records of one difficulty: no score is computed here.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from functools import cache, lru_cache
from typing import Any

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PhpLexer, TextLexer, get_lexer_for_filename
from pygments.util import ClassNotFound

from wpbench_k8s.records import Record
from wpbench_k8s.report.inputs import RunInput
from wpbench_k8s.scoring import aggregate, counted, group_key, group_name
from wpbench_k8s.summary.model import GroupAggregate, ImpactModel, SkillsDelta

TEXT_CAP = 4000  # characters of stdout, stderr and raw model output kept per record
DIFFICULTIES = ("basic", "intermediate", "hard")
_FORMATTER = HtmlFormatter(nowrap=True)


@dataclass
class Entry:
    """One leaderboard line: a model and variant of one run."""

    run: str
    key: str  # the summary's `models` key (scoring.group_name)
    label: str
    model: str
    variant: str
    runs: int
    tests: int
    excluded: int
    headline: float | None  # the summary's `scores.overall`: mean correctness, or (upstream) execution pass rate
    score: float | None
    score_std: float | None
    execution_pass_rate: float | None
    pass_rate_std: float | None
    knowledge: float | None
    quality: float | None
    cost_usd: float
    latency_ms: float | None
    statuses: dict[str, int]
    categories: dict[str, float | None]
    difficulties: dict[str, float | None] = field(default_factory=dict)


@dataclass
class RunView:
    label: str
    metadata: dict[str, Any]
    notes: list[str]
    skills_delta: list[SkillsDelta]
    impact: list[ImpactModel]
    special: dict[str, Any]  # the reference / exploits section of a check run


@dataclass
class Report:
    title: str
    runs: list[RunView]
    entries: list[Entry]
    categories: list[str]
    difficulties: list[str]
    failing_assertions: list[dict[str, Any]]
    failure_reasons: list[dict[str, Any]]
    excluded: list[dict[str, Any]]
    records: list[dict[str, Any]]
    has_records: bool

    @property
    def headline_differs(self) -> bool:
        """Upstream-profile runs head with the execution pass rate, not the score: show both."""
        return any(e.headline != e.score for e in self.entries)


def run_labels(runs: list[RunInput]) -> list[str]:
    """Runs are named by run id; several runs of one id (re-fetched) by their file too."""
    ids = [r.summary.metadata.run_id for r in runs]
    return [rid if ids.count(rid) == 1 else f"{rid} ({r.path.name})" for rid, r in zip(ids, runs, strict=True)]


def _entry(run: str, key: str, label: str, agg: GroupAggregate | None, row: Any | None) -> Entry:
    execution = agg.execution if agg else None
    knowledge = agg.knowledge if agg else None
    score = row.score if row else (agg.score if agg and agg.counted else None)
    counted_any = bool(agg and agg.counted)
    headline = agg.scores.overall if agg and agg.scores and counted_any else score
    return Entry(
        run=run,
        key=key,
        label=label,
        model=row.model if row else key,
        variant=row.variant if row else "baseline",
        runs=row.runs if row else 1,
        tests=row.tests if row else (agg.counted if agg else 0),
        excluded=row.excluded if row else (agg.excluded if agg else 0),
        headline=headline,
        score=score,
        score_std=row.score_std if row else None,
        execution_pass_rate=execution.pass_rate if execution and execution.tests else None,
        pass_rate_std=row.pass_rate_std if row else None,
        knowledge=knowledge.accuracy if knowledge and knowledge.tests else None,
        quality=row.quality if row else None,
        cost_usd=row.cost_usd if row else (agg.cost_usd if agg else 0.0),
        latency_ms=row.latency_ms_mean if row else (agg.latency_ms_mean if agg else None),
        statuses=dict(agg.statuses) if agg else {},
        categories={
            cat: c.score for cat, c in ((row.categories if row else None) or (agg.categories if agg else {})).items()
        },
    )


def _label(model: str, variant: str) -> str:
    return model if variant == "baseline" else f"{model} +{variant.removeprefix('with-')}"


def entries_of(run: RunInput, label: str, prefix: bool) -> list[Entry]:
    summary = run.summary
    out: list[Entry] = []
    if summary.comparison is not None:
        for row in summary.comparison.rows:
            key = group_name(row.model, row.variant)
            name = _label(row.model, row.variant)
            out.append(_entry(label, key, f"{label} · {name}" if prefix else name, summary.models.get(key), row))
    else:
        for key, agg in summary.models.items():
            out.append(_entry(label, key, f"{label} · {key}" if prefix else key, agg, None))
    if run.records is not None:
        by_key: dict[str, dict[str, list[Record]]] = defaultdict(lambda: defaultdict(list))
        for r in run.records:
            by_key[group_key(r)][r.difficulty].append(r)
        for entry in out:
            for difficulty, rs in by_key.get(entry.key, {}).items():
                scores = aggregate(rs)
                entry.difficulties[difficulty or "unknown"] = scores["score"] if scores["counted"] else None
    return out


def _cap(text: str, limit: int = TEXT_CAP) -> dict[str, Any]:
    return {"text": text[:limit], "total": len(text), "capped": len(text) > limit}


@cache
def _php_lexer() -> Any:
    return PhpLexer(startinline=True)  # building it loads PHP's function list: once


@lru_cache(maxsize=4096)  # repeated runs and shared answers repeat code
def _highlight(code: str, filename: str | None = None) -> str:
    lexer: Any = _php_lexer()
    if filename and not filename.endswith(".php"):
        try:
            lexer = get_lexer_for_filename(filename)
        except ClassNotFound:
            lexer = TextLexer()
    return str(highlight(code, lexer, _FORMATTER))


def record_view(index: int, run: str, record: Record, prompt: str | None) -> dict[str, Any]:
    """Everything the drill-down shows for one record. Code is highlighted (and so escaped) by
    Pygments here; every other string is inserted as text by the page."""
    verdict = record.grader.verdict
    output = record.output
    files = [{"name": name, "html": _highlight(text, name)} for name, text in sorted((output.files or {}).items())]
    return {
        "index": index,
        "run": run,
        "test_id": record.test_id,
        "item_id": record.item_id,
        "model": record.model,
        "variant": record.variant,
        "category": record.category,
        "difficulty": record.difficulty,
        "type": record.type,
        "counted": bool(counted([record])),
        "error": record.error,
        "status": record.grader.status,
        "reason": record.grader.reason,
        "duration_ms": record.grader.duration_ms,
        "infra_retries": record.grader.infra_retries,
        "cached": record.cached,
        "scores": record.scores.model_dump(),
        "prompt": prompt,
        "code_html": _highlight(output.code) if output.code else None,
        "files": files,
        "raw": _cap(output.raw) if not output.code and not files else None,
        "answer": output.answer,
        "extraction_error": output.extraction_error,
        "assertions": [a.model_dump() for a in verdict.assertions] if verdict else [],
        "static": verdict.static.model_dump() if verdict and verdict.static else None,
        "php_issues": [i.model_dump() for i in verdict.php_issues] if verdict else [],
        "stdout": _cap(record.grader.stdout),
        "stderr": _cap(record.grader.stderr),
        "usage": record.usage.model_dump(),
        "judge": record.judge,
    }


def failing_assertions(records: list[tuple[str, Record]], limit: int = 15) -> list[dict[str, Any]]:
    """The assertions counted records failed most often, with one message as an example."""
    counts: Counter[tuple[str, str]] = Counter()
    example: dict[tuple[str, str], str] = {}
    models: dict[tuple[str, str], set[str]] = defaultdict(set)
    for _, r in records:
        verdict = r.grader.verdict
        if verdict is None or not counted([r]):
            continue
        for a in verdict.assertions:
            if a.scored and not a.passed:
                key = (r.test_id, a.description or a.type)
                counts[key] += 1
                example.setdefault(key, a.message)
                models[key].add(group_key(r))
    return [
        {"test_id": t, "assertion": d, "count": n, "models": sorted(models[(t, d)]), "message": example[(t, d)]}
        for (t, d), n in counts.most_common(limit)
    ]


def failure_reasons(records: list[tuple[str, Record]], limit: int = 10) -> list[dict[str, Any]]:
    """Why counted records did not pass: status and reason, most common first."""
    counts: Counter[tuple[str, str]] = Counter(
        (r.grader.status, r.grader.reason) for _, r in records if counted([r]) and not r.scores.execution_pass
    )
    return [{"status": s, "reason": why, "count": n} for (s, why), n in counts.most_common(limit)]


def build_view(runs: list[RunInput], title: str | None = None) -> Report:
    labels = run_labels(runs)
    prefix = len(runs) > 1
    entries: list[Entry] = []
    views: list[RunView] = []
    all_records: list[tuple[str, Record]] = []
    drill: list[dict[str, Any]] = []
    for run, label in zip(runs, labels, strict=True):
        s = run.summary
        entries += entries_of(run, label, prefix)
        special = {k: getattr(s, k, None) for k in ("reference", "exploits")}
        views.append(
            RunView(
                label=label,
                metadata=s.metadata.model_dump(),
                notes=run.notes,
                skills_delta=s.comparison.skills_delta if s.comparison else [],
                impact=s.skill_impact.models if s.skill_impact else [],
                special={k: v for k, v in special.items() if v is not None},
            )
        )
        for r in run.records or []:
            all_records.append((label, r))
            drill.append(record_view(len(drill), label, r, run.prompts.get(r.test_id)))
    categories = sorted({c for e in entries for c in e.categories})
    seen = {d for e in entries for d in e.difficulties}
    difficulties = [d for d in DIFFICULTIES if d in seen] + sorted(seen - set(DIFFICULTIES))
    excluded = [d for d in drill if not d["counted"]]
    suites = sorted({v.metadata["suite"] for v in views})
    return Report(
        title=title or f"wpbench-k8s report — {', '.join(suites)}",
        runs=views,
        entries=entries,
        categories=categories,
        difficulties=difficulties,
        failing_assertions=failing_assertions(all_records),
        failure_reasons=failure_reasons(all_records),
        excluded=excluded,
        records=drill,
        has_records=all(r.records is not None for r in runs),
    )


def pygments_css() -> str:
    return str(_FORMATTER.get_style_defs(".code"))
