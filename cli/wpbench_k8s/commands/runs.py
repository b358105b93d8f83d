"""`wpbench-k8s runs`: the runs of an output folder, and with a cluster flag the cluster's runs."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from wpbench_k8s.commands.flags import (
    ClusterFlags,
    cluster_options,
    emit,
    flags_from,
    output_format_option,
    plain_console,
    reports_cluster_errors,
)


@dataclass(frozen=True)
class RunsFlags:
    folder: Path
    cluster: ClusterFlags
    output_format: str | None


def local_runs(folder: Path) -> list[dict[str, Any]]:
    """One row per run a local `run` started in `folder` (its `.jsonl.manifest`), newest first."""
    rows: list[dict[str, Any]] = []
    for side in sorted(folder.glob("*.jsonl.manifest"), reverse=True):
        jsonl = side.with_name(side.name.removesuffix(".manifest"))
        partial = jsonl.with_name(jsonl.name + ".partial")
        try:
            doc = json.loads(side.read_text(encoding="utf-8"))
            manifest = doc["manifest"]
            items = len(manifest["items"])
        except (OSError, ValueError, KeyError, TypeError):  # another tool's file, or a damaged one
            rows.append({"run_id": None, "state": "unreadable", "file": str(side.absolute())})
            continue
        records = jsonl if jsonl.exists() else partial
        try:
            done = sum(1 for line in records.read_text(encoding="utf-8").splitlines() if line.strip())
        except (OSError, UnicodeDecodeError):
            done = 0
        summary = (jsonl.parent / str(doc.get("summary_path", ""))).absolute()
        rows.append({
            "run_id": manifest.get("run_id"), "state": "finished" if jsonl.exists() else "partial",
            "mode": manifest.get("mode"), "suite": manifest.get("suite"), "started": doc.get("started_at"),
            "records": done, "items": items, "file": str(records.absolute()),
            "summary": str(summary) if jsonl.exists() and summary.is_file() else None,
        })  # fmt: skip
    return rows


def cluster_runs(flags: ClusterFlags) -> tuple[str, list[dict[str, Any]]]:
    """The namespace and one row per WPBenchRun in it (name, phase, counts, age), oldest first."""
    from wpbench_k8s.kube.client import RUNS

    cluster = flags.connect()
    now = datetime.now(UTC)
    rows: list[dict[str, Any]] = []
    for run in cluster.kube.items(RUNS, cluster.namespace):
        meta, st = run.get("metadata") or {}, run.get("status") or {}
        created = meta.get("creationTimestamp")
        age = ""
        if created:
            seconds = int((now - datetime.fromisoformat(created.replace("Z", "+00:00"))).total_seconds())
            age = f"{seconds // 86400}d" if seconds >= 86400 else f"{seconds // 3600}h" if seconds >= 3600 else (
                f"{seconds // 60}m" if seconds >= 60 else f"{seconds}s")  # fmt: skip
        rows.append({
            "name": meta.get("name"), "phase": st.get("phase", "Pending"), "done": st.get("done", 0),
            "total": st.get("total", (run.get("spec") or {}).get("items", 0)), "passed": st.get("passed", 0),
            "failed": st.get("failed", 0), "infra_errors": st.get("infraErrors", 0), "created": created, "age": age,
        })  # fmt: skip
    return cluster.namespace, sorted(rows, key=lambda r: r["created"] or "")


@click.command("runs")
@click.option("--output-dir", "folder", type=click.Path(file_okay=False, path_type=Path), default=Path("output"),
              show_default=True, help="Folder a local run wrote to (its --output's folder).")  # fmt: skip
@cluster_options
@output_format_option("-o", "--output-format")
@reports_cluster_errors
def runs_command(**params: Any) -> None:
    """List runs: the local runs in the output folder (finished or partial, records/items, files); with
    --context or --namespace, the cluster's runs instead (name, phase, counts, age).

    \b
    Examples:
      wpbench-k8s runs
      wpbench-k8s runs --context kind-wpbench -n wpbench -o json
    """
    flags = flags_from(RunsFlags, params)
    where = flags.cluster
    if where.context or where.namespace:
        namespace, rows = cluster_runs(where)
        if flags.output_format:
            emit({"namespace": namespace, "runs": rows}, flags.output_format)
            return
        _table(f"runs in namespace {namespace}", rows, ("name", "phase", "done", "total", "passed", "failed",
                                                        "infra_errors", "age"))  # fmt: skip
        return
    rows = local_runs(flags.folder)
    if flags.output_format:
        emit({"folder": str(flags.folder.absolute()), "runs": rows}, flags.output_format)
        return
    _table(f"runs in {flags.folder.absolute()}", rows, ("run_id", "state", "mode", "suite", "started", "records",
                                                        "items", "file"))  # fmt: skip


def _table(title: str, rows: list[dict[str, Any]], columns: tuple[str, ...]) -> None:
    from rich.table import Table

    if not rows:
        click.echo(f"{title}: none")
        return
    table = Table(title=title)
    for col in columns:
        table.add_column(col.replace("_", " "), overflow="fold")
    for row in rows:
        table.add_row(*("" if row.get(col) is None else str(row.get(col)) for col in columns))
    plain_console().print(table)


commands = [runs_command]
