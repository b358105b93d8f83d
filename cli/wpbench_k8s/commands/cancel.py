"""`wpbench-k8s cancel`: ask the controller to stop a run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import click

from wpbench_k8s.commands.flags import ClusterFlags, cluster_options, flags_from, reports_cluster_errors


@dataclass(frozen=True)
class CancelFlags:
    run_name: str
    cluster: ClusterFlags


@click.command("cancel")
@click.argument("run_name")
@cluster_options
@reports_cluster_errors
def cancel_command(**params: Any) -> None:
    """Stop a run: the controller deletes its running Jobs; stored results stay (`results` still works)."""
    from wpbench_k8s.cluster import cancel

    flags = flags_from(CancelFlags, params)
    cluster = flags.cluster.connect()
    cancel(cluster, flags.run_name)
    click.echo(f"cancel requested for {cluster.namespace}/{flags.run_name}")


commands = [cancel_command]
