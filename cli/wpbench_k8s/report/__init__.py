"""`wpbench-k8s report`: one self-contained HTML file from one or more runs' summaries and records."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from wpbench_k8s.report.inputs import RunInput, load_run
from wpbench_k8s.report.view import Report, build_view

if TYPE_CHECKING:
    from wpbench_k8s.manifest import RunManifest

__all__ = ["Report", "RunInput", "build_view", "load_run", "write_report", "write_run_report"]


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


def write_run_report(manifest: RunManifest, summary_path: Path, records_path: Path) -> Path:
    """The HTML report beside a finished run's summary (same name, .html), from the files just written;
    the prompts come from the manifest. `run --report` and `results --report` both call this."""
    path = summary_path.with_suffix(".html")
    prompts = {test_id: str(test.get("prompt", "")) for test_id, test in manifest.tests.items()}
    write_report([summary_path], path, prompts=prompts, records=records_path)
    return path
