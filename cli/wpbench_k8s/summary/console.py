"""A finished run's summary on the console: the model comparison tables, the score by category, and
the check runs' findings. `run` and `results` print the same tables from the same summary."""

from __future__ import annotations

from collections import defaultdict

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from wpbench_k8s.records import Record
from wpbench_k8s.scoring import counted
from wpbench_k8s.summary.model import RunSummary


def print_model_tables(summary: RunSummary, console: Console) -> None:
    """A models run: the comparison, the excluded records' reasons, the score by category, Skill Impact."""
    from wpbench_k8s.models import compare

    if summary.comparison is None:
        return
    data = summary.comparison.model_dump()
    console.print(compare.comparison_table(data, f"{summary.metadata.suite} — model comparison", console.width))
    for row in summary.comparison.rows:
        for message, count in row.errors.items():
            console.print(f"[yellow]{row.model} {row.variant}[/]: {count} excluded record(s): {escape(message)}")
    if len(summary.comparison.categories) > 1:
        console.print(compare.model_category_table(data))
    if summary.skill_impact is not None:
        impact = summary.skill_impact.model_dump()
        console.print(compare.impact_table(impact, width=console.width))
        for line in compare.impact_counts(impact):
            console.print(escape(line))


def category_table(records: list[Record], title: str) -> Table:
    """Per category: counted tests, passed, pass rate, mean score and excluded records; then the total."""
    table = Table(title=title)
    for col, justify in (("category", "left"), ("tests", "right"), ("passed", "right"), ("pass rate", "right"),
                         ("score", "right"), ("excluded", "right")):  # fmt: skip
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    groups: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        groups[r.category].append(r)
    for cat in sorted(groups):
        table.add_row(cat, *_cells(groups[cat]))
    table.add_section()
    table.add_row("TOTAL", *_cells(records), style="bold")
    return table


def _cells(records: list[Record]) -> list[str]:
    good = counted(records)
    passed = sum(r.scores.execution_pass for r in good)
    score = sum(r.scores.correctness for r in good) / len(good) if good else 0.0
    rate = passed / len(good) if good else 0.0
    return [str(len(good)), str(passed), f"{rate:.0%}", f"{score:.2f}", str(len(records) - len(good))]


def print_findings(summary: RunSummary, console: Console) -> int:
    """A check run's findings (exploitable tests, baselines far above chance, failing reference
    solutions); returns the exit code: 1 when there is any, else 0."""
    exploits, reference = summary.exploits, summary.reference
    if exploits is not None:
        for test_id, cheats in exploits.exploitable.items():
            console.print(f"[red]exploitable[/] {test_id}: {', '.join(cheats)}")
        if exploits.tests_checked:
            console.print(f"{len(exploits.exploitable)} of {exploits.tests_checked} execution tests exploitable")
        baselines = exploits.knowledge_baselines
        if baselines:
            for name, b in baselines.baselines.items():
                style = "[red]far above chance[/] " if b.flagged else ""
                console.print(f"{style}knowledge baseline {name}: {b.correct}/{b.tests} = {b.score:.1%}"
                              f" (chance {b.chance:.1%}, p = {b.p_value:.3g})")  # fmt: skip
        return 1 if exploits.exploitable or (baselines and baselines.above_chance) else 0
    if reference is not None:
        for test_id, why in reference.failing.items():
            console.print(f"[red]reference fails[/] {test_id}: {why[:300]}")
        solutions = reference.solutions_checked
        console.print(f"{solutions - len(reference.failing)} of {solutions} reference and alternative solutions pass")
        return 1 if reference.failing else 0
    return 0
