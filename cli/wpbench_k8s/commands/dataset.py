"""`wpbench-k8s dataset validate|export`: checks for test authors, and the single-file JSONL export."""

from __future__ import annotations

import json
from pathlib import Path

import click

from wpbench_k8s.dataset import Suite, export_rows, load_suite
from wpbench_k8s.errors import InputError
from wpbench_k8s.lint import lint_suite


@click.group("dataset")
def dataset_group() -> None:
    """Validate and export test suites (WP-Bench layout or JSONL)."""


@dataset_group.command("validate")
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option("--suite", help="Suite name inside a folder of suites or a multi-suite JSONL.")
def validate_command(path: Path, suite: str | None) -> None:
    """Check every test of a suite: schema, unique ids, weights, regexes, assertion types.

    Exit 0 when clean (warnings allowed), 2 when any test is invalid.
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


@dataset_group.command("export")
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option("-o", "--output", "output", type=click.Path(dir_okay=False, path_type=Path), required=True)
@click.option("--suite", help="Suite name inside a folder of suites.")
def export_command(path: Path, output: Path, suite: str | None) -> None:
    """Export a suite to one JSONL file (a row per test), loadable again with --dataset-path."""
    loaded: Suite = load_suite(path, suite)
    rows = export_rows(loaded)
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_name(output.name + ".tmp")
    tmp.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows), encoding="utf-8")
    tmp.replace(output)
    click.echo(f"wrote {len(rows)} rows to {output}")


commands = [dataset_group]
