"""`wpbench-k8s logs`: one test's grader pod logs (or its stored verdict once the pods are gone)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import click

from wpbench_k8s.commands.flags import ClusterFlags, cluster_options, flags_from, reports_cluster_errors


@dataclass(frozen=True)
class LogsFlags:
    run_name: str
    test_id: str
    cluster: ClusterFlags
    model: str | None


@click.command("logs")
@click.argument("run_name")
@click.argument("test_id")
@cluster_options
@click.option("--model", help="Only this model's pod (model runs grade a test once per model).")
@reports_cluster_errors
def logs_command(**params: Any) -> None:
    """Show the grader pod log of one test of a run (the stored verdict once the pod is gone)."""
    from wpbench_k8s.cluster import grader_logs
    from wpbench_k8s.cluster.logs import log_selector

    flags = flags_from(LogsFlags, params)
    cluster = flags.cluster.connect()
    selector = log_selector(flags.run_name, flags.test_id, flags.model)
    click.echo(f"# kubectl logs -n {cluster.namespace} -l {selector} --tail=-1", err=True)
    for section in grader_logs(cluster, flags.run_name, flags.test_id, flags.model):
        click.echo(section.header, err=True)
        click.echo(section.text, nl=not section.text.endswith("\n"))


commands = [logs_command]
