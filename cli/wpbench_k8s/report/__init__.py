"""`wpbench-k8s report`: one self-contained HTML file from one or more runs' summaries and records."""

from __future__ import annotations

from pathlib import Path

from wpbench_k8s.report.inputs import RunInput, load_run
from wpbench_k8s.report.view import Report, build_view

__all__ = ["Report", "RunInput", "build_view", "load_run", "write_report"]


def write_report(
    summaries: list[Path],
    output: Path,
    *,
    prompts: dict[str, str] | None = None,
    records: Path | None = None,
    dataset_path: Path | None = None,
    title: str | None = None,
) -> int:
    """Load every run (all of them before anything is written: bad input leaves no file), render,
    write `output` atomically. Returns the file's size in bytes. `prompts` and `records` (the JSONL,
    default beside each summary) are for a single run whose manifest and files are in hand."""
    from wpbench_k8s.report.page import write_page

    runs = [load_run(p, prompts=prompts, records=records, dataset_path=dataset_path) for p in summaries]
    return write_page(build_view(runs, title), output)
