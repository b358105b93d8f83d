"""`wpbench-k8s submit`: the run `wpbench-k8s run` would grade, handed to the controller on a cluster."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import click

from wpbench_k8s.commands.flags import ClusterFlags, cluster_options, flags_from, reports_cluster_errors
from wpbench_k8s.commands.run_flags import RunFlags, plan_from_flags, run_options


@dataclass(frozen=True)
class SubmitFlags:
    run: RunFlags
    cluster: ClusterFlags
    run_name: str | None
    max_in_flight: int | None
    infra_retries: int
    no_cache: bool
    dry_run: bool


@click.command("submit")
@run_options
@cluster_options
@click.option("--name", "run_name", help="Run name (default wpb-<run id>); lowercase DNS label, at most 40 chars.")
@click.option(
    "--max-in-flight",
    type=click.IntRange(1, 1000),
    help="Grader Jobs at once for this run (default: --execution-concurrency).",
)
@click.option(
    "--infra-retries",
    type=click.IntRange(0, 10),
    default=2,
    show_default=True,
    help="Infrastructure failures (eviction, node loss, crash without verdict) retried per item.",
)
@click.option(
    "--no-cache",
    is_flag=True,
    envvar="WPBENCH_NO_CACHE",
    help="Grade everything instead of reusing verdicts earlier runs of the namespace stored for the same task, "
    "image and profile (reference, exploit and --completions runs reuse them by default). Env: WPBENCH_NO_CACHE=1.",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print every object the run would bring into the cluster (multi-document YAML); contact no cluster.",
)
@reports_cluster_errors
def submit_command(**params: Any) -> None:
    """Submit a run to the cluster: a WPBenchRun plus the ConfigMaps holding its manifest; prints the run name.

    \b
    Examples:
      wpbench-k8s submit --check-reference-solution --limit 10 -n wpbench
      wpbench-k8s submit --config wp-bench.yaml --context kind-wpbench
      wpbench-k8s submit --check-reference-solution --dry-run > wpbenchrun-dryrun.yaml

    --dry-run prints the objects for reading (not a config: --config refuses it).
    Exit codes: 0 submitted, 2 bad input, 3 cluster unreachable or refusing.
    """
    click.echo(submit_run(flags_from(SubmitFlags, params)), nl=False)


def submit_run(flags: SubmitFlags) -> str:
    """Plan the run and submit it (or, with --dry-run, describe it); returns what to print."""
    from wpbench_k8s.cluster import dry_run_text, run_name, submit
    from wpbench_k8s.cluster.connection import resolve_namespace
    from wpbench_k8s.kube.objects import RunSettings

    _, manifest = plan_from_flags(flags.run, dry_run=flags.dry_run)
    name = run_name(manifest, flags.run_name)
    max_in_flight = flags.max_in_flight or manifest.execution_concurrency
    if flags.dry_run:  # no cluster: the namespace as kubectl would choose it
        where = flags.cluster
        namespace = resolve_namespace(where.kubeconfig, where.context, where.namespace)
        return dry_run_text(manifest, RunSettings(name=name, namespace=namespace, max_in_flight=max_in_flight,
                                                  infra_retries=flags.infra_retries,
                                                  cache=not flags.no_cache))  # fmt: skip
    cluster = flags.cluster.connect()
    settings = RunSettings(name=name, namespace=cluster.namespace, max_in_flight=max_in_flight,
                           infra_retries=flags.infra_retries, cache=not flags.no_cache)  # fmt: skip
    return submit(cluster, manifest, settings) + "\n"


commands = [submit_command]
