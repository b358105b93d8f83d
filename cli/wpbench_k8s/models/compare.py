"""Model comparison and Skill Impact, as plain dicts (the summary's `comparison` and `skill_impact`
sections, typed in `wpbench_k8s.summary`) and rich tables (printed by `summary.console`).

Rows are (model, variant). Errored records (`Record.error`, infra and harness errors: see
`scoring.counted`) never enter a score; they are counted in `excluded`. Cost counts every
record, because the money was spent either way.

With `--runs N` each item id ends in `--r<n>`: scores are pooled over runs, and `score_std` /
`pass_rate_std` are the standard deviations of the per-run means.

Skill Impact compares, per model and test, the baseline and with-skills variants over the same
tests (a test counts as passed when it passed in at least half of its runs):
fixed (failed -> passed), broken (passed -> failed), moved (failed both, score changed),
still_failing (failed both, same score). Tests passing in both are only counted.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rich import box
from rich.table import Table

from wpbench_k8s.records import Record
from wpbench_k8s.scoring import counted

BASELINE = "baseline"
WITH_SKILLS = "with-skills"
IMPACT_ORDER = ("fixed", "broken", "moved", "still_failing")
_RUN_SUFFIX = re.compile(r"--r(\d+)$")


def run_number(record: Record) -> int:
    match = _RUN_SUFFIX.search(record.item_id)
    return int(match.group(1)) if match else 1


def _mean(values: Sequence[float]) -> float | None:
    return round(statistics.fmean(values), 4) if values else None


def _std(values: Sequence[float]) -> float | None:
    return round(statistics.stdev(values), 4) if len(values) > 1 else None


def _passed(record: Record) -> bool:
    return record.scores.execution_pass


def model_row(model: str, variant: str, records: list[Record]) -> dict[str, Any]:
    """Aggregates for one (model, variant)."""
    good = counted(records)
    by_run: dict[int, list[Record]] = defaultdict(list)
    for r in good:
        by_run[run_number(r)].append(r)
    run_scores = [statistics.fmean(r.scores.correctness for r in rs) for _, rs in sorted(by_run.items())]
    run_passes = [statistics.fmean(float(_passed(r)) for r in rs) for _, rs in sorted(by_run.items())]
    categories: dict[str, list[Record]] = defaultdict(list)
    for r in good:
        categories[r.category].append(r)
    judged = [r.scores.quality for r in good if r.scores.quality is not None]
    judge_cost = sum(float((r.judge or {}).get("usage", {}).get("cost_usd", 0.0) or 0.0) for r in records)
    with_calls = [float(r.usage.latency_ms) for r in good if r.usage.calls]
    return {
        "model": model,
        "variant": variant,
        "runs": len({run_number(r) for r in records}),
        "tests": len({r.test_id for r in good}),
        "records": len(records),
        "excluded": len(records) - len(good),
        "score": _mean([r.scores.correctness for r in good]),
        "score_std": _std(run_scores),
        "pass_rate": _mean([float(_passed(r)) for r in good]),
        "pass_rate_std": _std(run_passes),
        "quality": _mean(judged),
        "judged": len(judged),
        "cost_usd": round(sum(r.usage.cost_usd for r in records), 6),
        "judge_cost_usd": round(judge_cost, 6),
        "latency_ms_mean": _mean(with_calls),
        "prompt_tokens": sum(r.usage.prompt_tokens for r in records),
        "completion_tokens": sum(r.usage.completion_tokens for r in records),
        "calls": sum(r.usage.calls for r in records),
        "retries": sum(r.usage.retries for r in records),
        # Why records were excluded, message -> count: a provider outage reads once per model.
        "errors": dict(Counter(r.error for r in records if r.error)),
        "categories": {
            cat: {
                "tests": len({r.test_id for r in rs}),
                "score": _mean([r.scores.correctness for r in rs]),
                "pass_rate": _mean([float(_passed(r)) for r in rs]),
            }
            for cat, rs in sorted(categories.items())
        },
    }


def _delta(a: float | None, b: float | None, digits: int = 4) -> float | None:
    return None if a is None or b is None else round(b - a, digits)


def skills_delta(baseline: dict[str, Any], with_skills: dict[str, Any], records: list[Record]) -> dict[str, Any]:
    """with-skills minus baseline for one model. Score and pass rate are paired: over the tests
    counted in both variants, so an errored record on one side does not skew the difference."""
    base = _per_test([r for r in records if r.variant == BASELINE])
    skill = _per_test([r for r in records if r.variant == WITH_SKILLS])
    paired = sorted(set(base) & set(skill))
    return {
        "model": baseline["model"],
        "paired_tests": len(paired),
        "score": _mean([skill[t].score - base[t].score for t in paired]),
        "pass_rate": _mean([skill[t].pass_rate - base[t].pass_rate for t in paired]),
        "quality": _delta(baseline["quality"], with_skills["quality"]),
        "cost_usd": _delta(baseline["cost_usd"], with_skills["cost_usd"], 6),
        "latency_ms_mean": _delta(baseline["latency_ms_mean"], with_skills["latency_ms_mean"], 1),
        "prompt_tokens": with_skills["prompt_tokens"] - baseline["prompt_tokens"],
    }


def _group(records: Iterable[Record]) -> dict[tuple[str, str], list[Record]]:
    groups: dict[tuple[str, str], list[Record]] = defaultdict(list)
    for r in records:
        groups[(r.model, r.variant)].append(r)
    return groups


def comparison(records: list[Record]) -> dict[str, Any]:
    """Rows per (model, variant) in first-seen order, and a Δ skills entry per model with both variants."""
    groups = _group(records)
    rows = [model_row(model, variant, rs) for (model, variant), rs in groups.items()]
    rows.sort(key=lambda row: (_first_index(records, row["model"]), row["variant"] != BASELINE))
    by_key = {(row["model"], row["variant"]): row for row in rows}
    deltas = [
        skills_delta(by_key[(model, BASELINE)], by_key[(model, WITH_SKILLS)], [r for r in records if r.model == model])
        for model in dict.fromkeys(row["model"] for row in rows)
        if (model, BASELINE) in by_key and (model, WITH_SKILLS) in by_key
    ]
    categories = sorted({cat for row in rows for cat in row["categories"]})
    return {"rows": rows, "skills_delta": deltas, "categories": categories}


def _first_index(records: list[Record], model: str) -> int:
    return next(i for i, r in enumerate(records) if r.model == model)


@dataclass(frozen=True)
class _TestResult:
    score: float  # mean correctness over runs
    pass_rate: float  # share of runs passed
    category: str

    @property
    def passed(self) -> bool:
        return self.pass_rate >= 0.5


def _per_test(records: list[Record]) -> dict[str, _TestResult]:
    """test id -> its result over runs, counted records only."""
    tests: dict[str, list[Record]] = defaultdict(list)
    for r in counted(records):
        tests[r.test_id].append(r)
    return {
        test_id: _TestResult(
            score=statistics.fmean(r.scores.correctness for r in rs),
            pass_rate=statistics.fmean(float(_passed(r)) for r in rs),
            category=rs[0].category,
        )
        for test_id, rs in tests.items()
    }


def skill_impact(records: list[Record]) -> dict[str, Any]:
    """Per model: the tests the skills fixed, broke, moved, or left failing."""
    groups = _group(records)
    models = list(dict.fromkeys(r.model for r in records))
    out: list[dict[str, Any]] = []
    for model in models:
        if (model, BASELINE) not in groups or (model, WITH_SKILLS) not in groups:
            continue
        base, skill = _per_test(groups[(model, BASELINE)]), _per_test(groups[(model, WITH_SKILLS)])
        tests: list[dict[str, Any]] = []
        counts = dict.fromkeys((*IMPACT_ORDER, "still_passing"), 0)
        for test_id in sorted(set(base) & set(skill)):
            b, sk = base[test_id], skill[test_id]
            b_score, b_pass, s_score, s_pass = b.score, b.passed, sk.score, sk.passed
            if b_pass and s_pass:
                counts["still_passing"] += 1
                continue
            if s_pass:
                change = "fixed"
            elif b_pass:
                change = "broken"
            elif abs(s_score - b_score) > 1e-9:
                change = "moved"
            else:
                change = "still_failing"
            counts[change] += 1
            tests.append(
                {"test_id": test_id, "category": b.category, "change": change,
                 "baseline": round(b_score, 4), "with_skills": round(s_score, 4)}
            )  # fmt: skip
        tests.sort(key=lambda t: (IMPACT_ORDER.index(t["change"]), t["test_id"]))
        compared = len(set(base) & set(skill))
        out.append({"model": model, "tests_compared": compared, "counts": counts, "tests": tests})
    return {"models": out}


# ---- rich tables -----------------------------------------------------------------------------


def _num(value: float | None, fmt: str = "{:.2f}", std: float | None = None) -> str:
    if value is None:
        return "—"
    text = fmt.format(value)
    return f"{text} ± {fmt.format(std)}" if std is not None else text


def _signed(value: float | None, fmt: str) -> str:
    if value is None:
        return "—"
    return ("+" if value > 0 else "") + fmt.format(value)


def _label(model: str, variant: str) -> str:
    return model if variant == BASELINE else f"{model} +{variant.removeprefix('with-')}"


def comparison_table(data: dict[str, Any], title: str = "Model comparison", width: int = 200) -> Table:
    """One row per (model, variant) and a Δ skills row per model. Below 110 columns the token and
    retry columns are left out (they stay in the JSON); quality shows only when something was judged."""
    rows = data["rows"]
    wide = width >= 110
    judged = any(row["quality"] is not None for row in rows)
    columns: list[tuple[str, str]] = [("model", "left"), ("tests", "right"), ("excl.", "right"),
                                      ("score", "right"), ("pass", "right")]  # fmt: skip
    if judged:
        columns.append(("quality", "right"))
    columns += [("cost $", "right"), ("latency", "right")]
    if wide:
        columns += [("tokens in/out", "right"), ("retries", "right")]
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False)
    for col, justify in columns:
        table.add_column(col, justify=justify, no_wrap=col == "model")  # type: ignore[arg-type]
    deltas = {d["model"]: d for d in data["skills_delta"]}
    for i, row in enumerate(rows):
        latency = row["latency_ms_mean"] / 1000 if row["latency_ms_mean"] is not None else None
        cells = [_label(row["model"], row["variant"]), str(row["tests"]), str(row["excluded"]),
                 _num(row["score"], std=row["score_std"]),
                 _num(row["pass_rate"], "{:.0%}", row["pass_rate_std"])]  # fmt: skip
        if judged:
            cells.append(_num(row["quality"]))
        cells += [f"{row['cost_usd']:.4f}", _num(latency, "{:.2f}s")]
        if wide:
            cells += [f"{row['prompt_tokens']}/{row['completion_tokens']}", str(row["retries"])]
        table.add_row(*cells)
        last_of_model = i + 1 == len(rows) or rows[i + 1]["model"] != row["model"]
        if last_of_model and row["model"] in deltas:
            d = deltas[row["model"]]
            lat = d["latency_ms_mean"] / 1000 if d["latency_ms_mean"] is not None else None
            cells = ["  Δ skills", str(d["paired_tests"]), "", _signed(d["score"], "{:.2f}"),
                     _signed(d["pass_rate"], "{:.0%}")]  # fmt: skip
            if judged:
                cells.append(_signed(d["quality"], "{:.2f}"))
            cells += [_signed(d["cost_usd"], "{:.4f}"), _signed(lat, "{:.2f}s")]
            if wide:
                cells += [_signed(float(d["prompt_tokens"]), "{:.0f}") + " in", ""]
            table.add_row(*cells, style="bold cyan")
        if last_of_model and i + 1 < len(rows):
            table.add_section()
    return table


def model_category_table(data: dict[str, Any], title: str = "Score by category") -> Table:
    """One column per (model, variant): its score and counted tests in each category."""
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("category", no_wrap=True)
    for row in data["rows"]:
        table.add_column(_label(row["model"], row["variant"]), justify="right")
    for cat in data["categories"]:
        cells = []
        for row in data["rows"]:
            c = row["categories"].get(cat)
            cells.append(f"{c['score']:.2f} ({c['tests']})" if c else "—")
        table.add_row(cat, *cells)
    return table


def impact_table(data: dict[str, Any], title: str = "Skill Impact", width: int = 200) -> Table:
    """Every fixed, broken, moved and still-failing test per model (`impact_counts` adds the totals,
    tests passing both ways included). Below 100 columns the category column is left out."""
    wide = width >= 100
    table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("model", no_wrap=True)
    table.add_column("test", no_wrap=True)
    if wide:
        table.add_column("category")
    table.add_column("change", no_wrap=True)
    table.add_column("baseline", justify="right")
    table.add_column("+skills", justify="right")
    styles = {"fixed": "green", "broken": "red", "moved": "yellow", "still_failing": "dim"}
    for model in data["models"]:
        for t in model["tests"]:
            change = t["change"]
            cells = [model["model"], t["test_id"]] + ([t["category"]] if wide else [])
            cells += [
                f"[{styles[change]}]{change.replace('_', ' ')}[/]",
                f"{t['baseline']:.2f}",
                f"{t['with_skills']:.2f}",
            ]
            table.add_row(*cells)
    return table


def impact_counts(data: dict[str, Any]) -> list[str]:
    """One line per model: how many tests the skills fixed, broke, moved or left alone."""
    lines = []
    for model in data["models"]:
        c = model["counts"]
        lines.append(
            f"{model['model']}: {c['fixed']} fixed, {c['broken']} broken, {c['moved']} moved, "
            f"{c['still_failing']} still failing, {c['still_passing']} still passing "
            f"({model['tests_compared']} tests compared)"
        )
    return lines
