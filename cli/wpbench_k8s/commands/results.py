"""`wpbench-k8s results`: a run's records fetched from the cluster, as a local run writes them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from wpbench_k8s.commands.flags import (
    ClusterFlags,
    cluster_options,
    emit,
    flags_from,
    output_format_option,
    reports_cluster_errors,
)


@dataclass(frozen=True)
class ResultsFlags:
    run_name: str
    cluster: ClusterFlags
    output: Path
    report: bool
    output_format: str | None = None


@click.command("results")
@click.argument("run_name")
@cluster_options
@click.option(
    "--output",
    "-o",
    "output",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="JSONL path; the summary JSON goes beside it (same stem, .json).",
)
@click.option("--report", "report", is_flag=True, help="Also write the HTML report beside the summary (.html).")
@output_format_option("--output-format")
@reports_cluster_errors
def results_command(**params: Any) -> None:
    """Fetch a run's records: the same JSONL (and summary JSON) a local `wpbench-k8s run` writes.

    A finished model run also prints the model comparison (Δ skills, Skill Impact) tables of a local
    run, on stdout. An unfinished run's records go to OUTPUT.partial (no summary), as a local run's do.
    With --report a finished run's HTML report goes beside the summary (same stem, .html).
    """
    from rich.console import Console

    from wpbench_k8s.cluster import fetch_results

    flags = flags_from(ResultsFlags, params)
    console = Console(stderr=True) if flags.output_format else Console()  # stdout holds only the document then
    got = fetch_results(flags.cluster.connect(), flags.run_name, flags.output, report=flags.report, console=console)
    paths = {"records_path": str(got.records_path.resolve()),
             "summary_path": str(got.summary_path.resolve()) if got.summary_path else None,
             "report_path": str(got.report_path.resolve()) if got.report_path else None}  # fmt: skip
    for warning in got.warnings:  # ConfigMaps that claimed to hold the run's results: never read
        click.echo(f"warning: {warning}", err=True)
    click.echo(got.suite, err=True)
    if flags.output_format:
        doc = {"run": flags.run_name, "phase": got.phase, "records": got.records, "items": got.items, **paths,
               "suite": got.suite, "warnings": list(got.warnings)}  # fmt: skip
        emit(doc, flags.output_format)
        return
    if got.summary_path is None:
        unfinished = "; no report for an unfinished run" if flags.report else ""
        click.echo(f"run {flags.run_name} is {got.phase}: {got.records}/{got.items} records -> "
                   f"{paths['records_path']}{unfinished}", err=True)  # fmt: skip
        return
    click.echo(f"{got.records} records -> {paths['records_path']}; summary -> {paths['summary_path']}", err=True)
    if got.report_path is not None:
        click.echo(f"report: {paths['report_path']}", err=True)


commands = [results_command]
