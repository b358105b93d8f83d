"""`wpbench-k8s requeue`: grade a finished run's infra errors again (the cluster's `run --resume`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import click

from wpbench_k8s.commands.flags import ClusterFlags, cluster_options, flags_from, reports_cluster_errors


@dataclass(frozen=True)
class RequeueFlags:
    run_name: str
    cluster: ClusterFlags


@click.command("requeue")
@click.argument("run_name")
@cluster_options
@reports_cluster_errors
def requeue_command(**params: Any) -> None:
    """Grade a finished run's infra errors again (and items a cancel left ungraded); final verdicts are kept.

    The cluster's `run --resume`: the controller drops the run's infra_error records and grades every
    item without one; `results` then writes the files an uninterrupted run gives. A run that does not
    exist or has not finished is refused (exit 2).

    \b
    Example:
      wpbench-k8s requeue wpb-20260101t120000z && wpbench-k8s status wpb-20260101t120000z --watch
    """
    from wpbench_k8s.cluster import requeue

    flags = flags_from(RequeueFlags, params)
    cluster = flags.cluster.connect()
    where = f"{cluster.namespace}/{flags.run_name}"
    found = requeue(cluster, flags.run_name)
    if found.nothing:
        click.echo(f"nothing to requeue: every item of {where} has a final verdict")
        return
    click.echo(f"requeued {where}: {found.infra_errors} infra error(s) and {found.never_graded} never graded "
               f"item(s) go to graders again; follow with: wpbench-k8s status {flags.run_name} --watch")  # fmt: skip


commands = [requeue_command]
