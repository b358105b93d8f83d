"""`wpbench-k8s status`: a run's progress, once or followed to its end."""

from __future__ import annotations

import sys
from dataclasses import dataclass
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
class StatusFlags:
    run_name: str
    cluster: ClusterFlags
    watch: bool
    output_format: str | None = None


@click.command("status")
@click.argument("run_name")
@cluster_options
@click.option("--watch", "-w", is_flag=True, help="Follow the run with a progress bar until it finishes.")
@output_format_option("-o", "--output-format")
@reports_cluster_errors
def status_command(**params: Any) -> None:
    """Show a run's phase, done/total, passes, failures and infra retries."""
    show_status(flags_from(StatusFlags, params))


def show_status(flags: StatusFlags) -> None:
    """Print the status line; with --watch, a progress bar on stderr until the run ends (exit 1 unless it
    Succeeded)."""
    from wpbench_k8s.cluster import follow, status_line

    cluster = flags.cluster.connect()
    if not flags.watch or flags.output_format:
        run = cluster.run(flags.run_name) if not flags.watch else follow(cluster, flags.run_name, lambda run: None)
        if flags.output_format:
            emit(status_doc(run), flags.output_format)
        else:
            click.echo(status_line(run))
        if flags.watch and (run.get("status") or {}).get("phase") != "Succeeded":
            sys.exit(1)
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    name = flags.run_name
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[counts]}"),
               TimeElapsedColumn())  # fmt: skip
    with Progress(*columns, console=Console(stderr=True), disable=not sys.stderr.isatty()) as progress:
        bar = progress.add_task(name, total=None, counts="")

        def show(run: dict[str, Any]) -> None:
            st = run.get("status") or {}
            counts = (f"passed {st.get('passed', 0)} failed {st.get('failed', 0)} "
                      f"infra {st.get('infraErrors', 0)}/{st.get('infraRetries', 0)}")  # fmt: skip
            progress.update(bar, total=st.get("total") or run["spec"].get("items"), completed=st.get("done", 0),
                            description=f"{name} {st.get('phase', 'Pending')}", counts=counts)  # fmt: skip

        run = follow(cluster, name, show)
    click.echo(status_line(run))
    if (run.get("status") or {}).get("phase") != "Succeeded":
        sys.exit(1)


COUNTS = ("done", "passed", "failed", "errors", "infraErrors", "infraRetries", "cached")


def status_doc(run: dict[str, Any]) -> dict[str, Any]:
    """A run's name, namespace, phase and counts as one document (`-o json|yaml`)."""
    meta, st = run.get("metadata") or {}, run.get("status") or {}
    return {
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "created": meta.get("creationTimestamp"),
        "phase": st.get("phase", "Pending"),
        "total": st.get("total", (run.get("spec") or {}).get("items", 0)),
        **{key: st.get(key, 0) for key in COUNTS},
        "score": st.get("score", 0.0),
        "message": st.get("message", ""),
    }


commands = [status_command]
