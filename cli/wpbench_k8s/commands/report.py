"""`wpbench-k8s report`: a self-contained HTML report of one or more runs."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("report")
@click.argument("results", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--output",
    "-o",
    "output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("report.html"),
    show_default=True,
    help="HTML file to write.",
)
@click.option(
    "--dataset-path",
    type=click.Path(exists=True, path_type=Path),
    help="Suite the runs graded, for the prompts (default: each run's dataset_source).",
)
@click.option("--title", help="Page title (default: names the suites).")
def report_command(results: tuple[Path, ...], output: Path, dataset_path: Path | None, title: str | None) -> None:
    """Write one HTML file from summary JSONs (of `run` or `results`); several runs are compared side by side.

    The records JSONL beside each summary (same name, .jsonl) gives the per-test drill-down. The file
    embeds everything it shows (plotly.js included) and opens offline.

    \b
    Examples:
      wpbench-k8s report output/results_20261130T182718Z.json -o report.html
      wpbench-k8s report base.json skills.json -o compare.html
    """
    from wpbench_k8s.report import write_report

    size = write_report(list(results), output, dataset_path=dataset_path, title=title)
    click.echo(f"report: {output} ({size / 1e6:.1f} MB)")


commands = [report_command]
