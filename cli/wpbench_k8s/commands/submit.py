"""`wpbench-k8s submit`: the run `wpbench-k8s run` would grade, handed to the controller on a cluster."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from wpbench_k8s.commands.flags import ClusterFlags, cluster_options, flags_from, reports_cluster_errors
from wpbench_k8s.commands.run_flags import RunFlags, plan_from_flags, run_options

MAX_CANDIDATES_PER_POD = 100  # kube.crd's bound (not imported: `--help` never pays for the kubernetes client)


@dataclass(frozen=True)
class SubmitFlags:
    run: RunFlags
    cluster: ClusterFlags
    run_name: str | None
    max_in_flight: int | None
    infra_retries: int
    no_cache: bool
    queue: str | None
    workload_priority_class: str | None
    placement: str | None
    candidates_per_pod: int
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
    "--queue",
    callback=lambda ctx, param, value: _name(param, value),
    help="A Kueue LocalQueue of the namespace: grader Jobs wait suspended until Kueue admits them "
    "(default: run.queue in the config, else the release's grader.queue, else none).",
)
@click.option(
    "--workload-priority-class",
    callback=lambda ctx, param, value: _name(param, value),
    help="A Kueue WorkloadPriorityClass for the run's grader Jobs (orders admission and preemption; needs a queue).",
)
@click.option(
    "--placement",
    type=click.Path(exists=True, dir_okay=False),
    help="YAML file of pod-spec fields for grader pods: imagePullSecrets, nodeSelector, tolerations, affinity, "
    "priorityClassName, runtimeClassName. Each field set replaces the release's default (grader.placement).",
)
@click.option(
    "--candidates-per-pod",
    type=click.IntRange(1, MAX_CANDIDATES_PER_POD),
    default=1,
    show_default=True,
    help="Fast mode only (--execution-isolation fork_per_test): one grader pod grades this many items in order, "
    "each in a fresh runner on a fresh site; a record per item, failures charged per item.",
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


def _name(param: click.Parameter, value: str | None) -> str | None:
    """A Kubernetes object name (DNS label) or None."""
    import re

    from wpbench_k8s.kube.placement import NAME_PATTERN

    if value is not None and (len(value) > 63 or not re.match(NAME_PATTERN, value)):
        raise click.BadParameter(f"{value!r} is not a Kubernetes object name (lowercase DNS label)", param=param)
    return value


def _placement(path: str | None) -> Any:
    import yaml

    from wpbench_k8s.errors import InputError
    from wpbench_k8s.kube.placement import Placement, parse_placement

    if path is None:
        return Placement()
    try:
        return parse_placement(yaml.safe_load(Path(path).read_text(encoding="utf-8")), path)
    except (ValueError, yaml.YAMLError) as exc:
        raise InputError(f"--placement {exc}") from None


def submit_run(flags: SubmitFlags) -> str:
    """Plan the run and submit it (or, with --dry-run, describe it); returns what to print."""
    from wpbench_k8s.cluster import dry_run_text, run_name, submit
    from wpbench_k8s.cluster.connection import resolve_namespace
    from wpbench_k8s.errors import InputError
    from wpbench_k8s.kube.objects import RunSettings

    placement = _placement(flags.placement)
    config, manifest = plan_from_flags(flags.run, dry_run=flags.dry_run)
    fast = manifest.grader.execution_isolation == "fork_per_test"
    if flags.candidates_per_pod > 1 and not fast:
        raise InputError(
            f"--candidates-per-pod {flags.candidates_per_pod}: one pod grades several items only in fast mode "
            f"(--execution-isolation fork_per_test); run.execution_isolation is {manifest.grader.execution_isolation}"
        )
    name = run_name(manifest, flags.run_name)
    queue = flags.queue or config.run.queue or ""
    if flags.workload_priority_class and not queue:
        raise InputError("--workload-priority-class: Kueue orders queued Jobs; name a queue (--queue or run.queue)")
    max_in_flight = flags.max_in_flight or manifest.execution_concurrency
    where = flags.cluster
    # no cluster for a dry run: the namespace as kubectl would choose it
    cluster = None if flags.dry_run else where.connect()
    namespace = cluster.namespace if cluster else resolve_namespace(where.kubeconfig, where.context, where.namespace)
    settings = RunSettings(name=name, namespace=namespace, max_in_flight=max_in_flight,
                           infra_retries=flags.infra_retries, cache=not flags.no_cache, queue=queue,
                           workload_priority=flags.workload_priority_class or "", placement=placement,
                           candidates_per_pod=flags.candidates_per_pod)  # fmt: skip
    if cluster is None:
        return dry_run_text(manifest, settings)
    from wpbench_k8s.pipeline import load_run_suite
    from wpbench_k8s.verified import suite_table

    table = suite_table(load_run_suite(config)).model_dump_json()
    return submit(cluster, manifest, settings, table) + "\n"


commands = [submit_command]
