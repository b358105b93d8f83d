"""`wpbench-k8s dataset validate|export`: checks for test authors, and the single-file JSONL export."""

from __future__ import annotations

import json
from pathlib import Path

import click

from wpbench_k8s.dataset import KnowledgeTest, Suite, export_rows, load_suite
from wpbench_k8s.errors import InputError, OutputWriteError, WPBenchError
from wpbench_k8s.knowledge_baselines import (
    ALPHA,
    BaselineResult,
    key_distribution,
    length_rank_distribution,
    run_baselines,
)
from wpbench_k8s.lint import lint_suite
from wpbench_k8s.outputs import atomic_write


class BaselineAboveChance(WPBenchError):
    """The suite is well-formed, but an answer that knows nothing scores far above chance."""

    exit_code = 1


def baseline_report(tests: list[KnowledgeTest]) -> list[BaselineResult]:
    """Print the key distribution and every baseline's score against chance; return the results."""
    results = run_baselines(tests)
    keys = key_distribution(tests)
    total = sum(keys.values())
    if total:
        shares = ", ".join(f"{k} {n} ({n / total:.0%})" for k, n in keys.items())
        click.echo(f"multiple-choice keys: {shares}")
        ranks = ", ".join(f"{r}: {n}" for r, n in length_rank_distribution(tests).items())
        click.echo(f"keyed option's length rank (1 = longest): {ranks}")
    for r in results:
        if r.tests:
            mark = "  FAR ABOVE CHANCE" if r.flagged else ""
            click.echo(
                f"baseline {r.name:<15} {r.correct:>3}/{r.tests:<3} = {r.score:6.1%}   chance {r.chance_rate:6.1%}"
                f"   p = {r.p_value:.3g}{mark}"
            )
    return results


@click.group("dataset")
def dataset_group() -> None:
    """Validate and export test suites (WP-Bench layout or JSONL)."""


@dataset_group.command("validate")
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option("--suite", help="Suite name inside a folder of suites or a multi-suite JSONL.")
def validate_command(path: Path, suite: str | None) -> None:
    """Check every test of a suite: schema, unique ids, weights, regexes, assertion types, the shape
    of alternative solutions, each short answer's sample answer and probes (accepted replies must
    score 1, rejected near-misses 0), and whether answers that know nothing score on its knowledge tests.

    The knowledge report lists how often each letter is the multiple-choice key and what the
    baselines score: always A, B, C or D, the longest or the shortest option, all letters at once, and a hedge
    naming the right answer and a wrong one. A baseline is far above chance when the one-sided exact
    p-value of its score, with each test an independent trial at the baseline's chance level (1/k
    for k options; 0 for answers naming several options), is below 0.001.

    Exit 0 when clean (warnings allowed), 1 when every test is valid but a baseline scores far above
    chance, 2 when any test is invalid.
    """
    loaded = load_suite(path, suite)
    problems = lint_suite(loaded)
    errors = [p for p in problems if p.level == "error"]
    for p in problems:
        click.echo(f"{p.level}: {p.where}: {p.message}", err=True)
    click.echo(
        f"{loaded.name}: {len(loaded.execution)} execution + {len(loaded.knowledge)} knowledge tests, "
        f"{len(errors)} error(s), {len(problems) - len(errors)} warning(s)"
    )
    if errors:
        raise InputError(f"{path}: {len(errors)} invalid test field(s)")
    flagged = [r for r in baseline_report(loaded.knowledge) if r.flagged]
    if flagged:
        names = ", ".join(f"{r.name} ({r.score:.0%} against {r.chance_rate:.0%})" for r in flagged)
        raise BaselineAboveChance(f"{path}: baseline(s) far above chance (p < {ALPHA}): {names}")


@dataset_group.command("export")
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option("-o", "--output", "output", type=click.Path(dir_okay=False, path_type=Path), required=True)
@click.option("--suite", help="Suite name inside a folder of suites.")
def export_command(path: Path, output: Path, suite: str | None) -> None:
    """Export a suite to one JSONL file (a row per test), loadable again with --dataset-path."""
    loaded: Suite = load_suite(path, suite)
    rows = export_rows(loaded)
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(output, "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    except OSError as exc:
        raise OutputWriteError(f"cannot write {output}: {exc.strerror}") from exc
    click.echo(f"wrote {len(rows)} rows to {output.resolve()}")


commands = [dataset_group]


@dataset_group.command("digest")
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option("--suite", help="Suite name inside a folder of suites or a multi-suite JSONL.")
def digest_command(path: Path, suite: str | None) -> None:
    """Print a suite's name and digest, as the controller recomputes it from a run's payload.

    A cluster admin pins trusted suites with it (chart value trustedSuites: NAME: DIGEST); runs grading a
    pinned suite with that digest report suite_verified: true. The digest covers every test of the suite
    (its checks and answer keys), not the file layout.
    """
    from wpbench_k8s.verified import suite_table

    table = suite_table(load_suite(path, suite))
    click.echo(f"{table.suite} {table.digest}")
