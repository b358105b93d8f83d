"""Cluster commands: `submit`, `status`, `results`, `logs`, `cancel` (a run on Kubernetes).

`submit` builds the same run manifest as `wpbench-k8s run` (same flags, same meaning) and hands it
to the controller as a WPBenchRun plus ConfigMaps the run owns; the others read the run back.
"""

from __future__ import annotations

import functools
import json
import re
import sys
from pathlib import Path
from typing import Any

import click

from wpbench_k8s.commands.run import plan_from_flags, run_options
from wpbench_k8s.errors import InputError, WPBenchError
from wpbench_k8s.records import json_line

DEFAULT_NAMESPACE = "wpbench"
_RUN_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class ClusterError(WPBenchError):
    """The cluster said no (not found, forbidden, unreachable)."""

    exit_code = 3


def cluster_options(func: Any) -> Any:
    """Where the run lives: kubeconfig, context, namespace (as kubectl spells them)."""
    for option in reversed(
        [
            click.option("--kubeconfig", envvar="KUBECONFIG", type=click.Path(dir_okay=False), help="kubeconfig file."),
            click.option("--context", help="kubeconfig context (default: the current one)."),
            click.option("--namespace", "-n", help=f"Namespace (default: the context's, else {DEFAULT_NAMESPACE})."),
        ]
    ):
        func = option(func)
    return func


class Cluster:
    """The API client for one kubeconfig/context/namespace (created lazily: --dry-run needs none)."""

    def __init__(self, kubeconfig: str | None, context: str | None, namespace: str | None) -> None:
        from wpbench_k8s.kube.client import Kube, api_client

        self.kube = Kube(api_client(kubeconfig, context))
        self.namespace = namespace or _context_namespace(kubeconfig, context) or DEFAULT_NAMESPACE

    def run(self, name: str) -> dict[str, Any]:
        from wpbench_k8s.kube.client import RUNS, KubeError

        try:
            return self.kube.get(RUNS, self.namespace, name)
        except KubeError as exc:
            raise _api_error(exc, f"run {self.namespace}/{name}") from exc


def _context_namespace(kubeconfig: str | None, context: str | None) -> str | None:
    try:
        from kubernetes import config

        kconfig: Any = config
        contexts, active = kconfig.list_kube_config_contexts(kubeconfig)
    except Exception:
        return None
    chosen = next((c for c in contexts if c["name"] == context), None) if context else active
    ns = ((chosen or {}).get("context") or {}).get("namespace")
    return str(ns) if ns else None


def unreachable_is_an_error(func: Any) -> Any:
    """A command whose API server cannot be reached says so in one line (exit 3), no traceback."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from wpbench_k8s.kube.client import KubeError, Unreachable

        try:
            return func(*args, **kwargs)
        except Unreachable as exc:
            raise ClusterError(f"cannot reach the Kubernetes API server: {exc}") from exc
        except KubeError as exc:
            raise _api_error(exc, "Kubernetes API") from exc

    return wrapper


def _api_error(exc: Any, what: str) -> ClusterError:
    """A KubeError in one line naming what was asked for."""
    message = exc.message or exc.reason
    if exc.status == 404:
        return ClusterError(f"{what}: not found ({message})")
    if exc.status is None:
        return ClusterError(f"{what}: cannot reach the Kubernetes API server: {exc}")
    return ClusterError(f"{what}: {exc.status} {message}")


# ---- submit -----------------------------------------------------------------------------------
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
    "--dry-run",
    is_flag=True,
    help="Print every object the run would bring into the cluster (multi-document YAML); contact no cluster.",
)
@unreachable_is_an_error
def submit_command(**params: Any) -> None:
    """Submit a run to the cluster: a WPBenchRun plus the ConfigMaps holding its manifest; prints the run name.

    \b
    Examples:
      wpbench-k8s submit --check-reference-solution --limit 10 -n wpbench
      wpbench-k8s submit --config run.yaml --context kind-wpbench
      wpbench-k8s submit --check-reference-solution --dry-run > run.yaml
    """
    from wpbench_k8s.kube.names import MAX_RUN_NAME
    from wpbench_k8s.kube.objects import RunSettings

    _, manifest = plan_from_flags(params)
    name = params.get("run_name") or f"wpb-{manifest.run_id}".lower()
    if len(name) > MAX_RUN_NAME or not _RUN_NAME.match(name):
        raise InputError(f"--name: {name!r} must be a lowercase DNS label of at most {MAX_RUN_NAME} characters")
    namespace = params.get("namespace")
    if params.get("dry_run"):
        namespace = (
            namespace or _context_namespace(params.get("kubeconfig"), params.get("context")) or DEFAULT_NAMESPACE
        )
    settings_args = {
        "name": name,
        "max_in_flight": params.get("max_in_flight") or manifest.execution_concurrency,
        "infra_retries": params["infra_retries"],
    }
    if params.get("dry_run"):
        import yaml

        from wpbench_k8s.kube.objects import DRY_RUN_KIND, dry_run_document

        document = dry_run_document(manifest, RunSettings(namespace=namespace or DEFAULT_NAMESPACE, **settings_args))
        click.echo(
            f"# wpbench-k8s submit --dry-run: run {name}, {len(manifest.items)} items, manifest {manifest.digest()}"
        )
        click.echo(
            f"# For reading only: the objects sit inside one {DRY_RUN_KIND} document, which no cluster serves, so\n"
            "# `kubectl apply` refuses it (their owner uids are placeholders the API server would never match)."
        )
        click.echo(yaml.safe_dump(document, sort_keys=False), nl=False)
        return
    cluster = Cluster(params.get("kubeconfig"), params.get("context"), namespace)
    settings = RunSettings(namespace=cluster.namespace, **settings_args)
    submit(cluster, manifest, settings)
    click.echo(name)


def submit(cluster: Cluster, manifest: Any, settings: Any) -> str:
    """Create the run, then its payload ConfigMaps owned by it (the controller waits for all of them)."""
    from wpbench_k8s.kube.client import CONFIG_MAPS, RUNS, KubeError, to_dict
    from wpbench_k8s.kube.objects import owner_reference, payload_config_maps, run_object

    maps = payload_config_maps(manifest, settings, None)
    names = [m.metadata.name for m in maps if m.metadata and m.metadata.name]
    body = run_object(manifest, settings, names)
    try:
        created = cluster.kube.create(RUNS, settings.namespace, body)
    except KubeError as exc:
        raise _api_error(exc, f"create run {settings.namespace}/{settings.name}") from exc
    owner = owner_reference(settings.name, created["metadata"]["uid"])
    for cm in maps:
        assert cm.metadata is not None
        cm.metadata.owner_references = [owner]
        try:
            cluster.kube.create(CONFIG_MAPS, settings.namespace, to_dict(cm))
        except KubeError as exc:
            raise _api_error(exc, f"create ConfigMap {cm.metadata.name}") from exc
    return str(settings.name)


# ---- status -----------------------------------------------------------------------------------
def _status_line(run: dict[str, Any]) -> str:
    st = run.get("status") or {}
    total = st.get("total", run["spec"].get("items", 0)) or 0
    done = st.get("done", 0)
    filled = round(24 * done / total) if total else 0
    bar = "[" + "#" * filled + "." * (24 - filled) + "]"
    return (
        f"{run['metadata']['name']}: {st.get('phase', 'Pending')}  {bar} {done}/{total} done"
        f"  passed {st.get('passed', 0)}  failed {st.get('failed', 0)}  errors {st.get('errors', 0)}"
        f"  infra {st.get('infraErrors', 0)} (retries {st.get('infraRetries', 0)})  score {st.get('score', 0.0)}"
        + (f"\n  {st['message']}" if st.get("message") else "")
    )


@click.command("status")
@click.argument("run_name")
@cluster_options
@click.option("--watch", "-w", is_flag=True, help="Follow the run with a progress bar until it finishes.")
@unreachable_is_an_error
def status_command(
    run_name: str, kubeconfig: str | None, context: str | None, namespace: str | None, watch: bool
) -> None:
    """Show a run's phase, done/total, passes, failures and infra retries."""
    from wpbench_k8s.kube import crd

    cluster = Cluster(kubeconfig, context, namespace)
    run = cluster.run(run_name)
    if not watch:
        click.echo(_status_line(run))
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from wpbench_k8s.kube.client import RUNS, Watcher

    console = Console(stderr=True)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[counts]}"),
        TimeElapsedColumn(),
        console=console,
    ) as progress:
        bar = progress.add_task(run_name, total=None, counts="")

        def show(obj: dict[str, Any]) -> bool:
            st = obj.get("status") or {}
            progress.update(
                bar,
                total=st.get("total") or obj["spec"].get("items"),
                completed=st.get("done", 0),
                description=f"{run_name} {st.get('phase', 'Pending')}",
                counts=f"passed {st.get('passed', 0)} failed {st.get('failed', 0)} "
                f"infra {st.get('infraErrors', 0)}/{st.get('infraRetries', 0)}",
            )
            return st.get("phase") in crd.TERMINAL_PHASES

        # The one watch loop: ERROR events and 410 Gone relist (the run comes again as LISTED).
        watcher = Watcher(
            cluster.kube,
            RUNS,
            cluster.namespace,
            field_selector=f"metadata.name={run_name}",
            resource_version=run["metadata"].get("resourceVersion"),
        )
        if not show(run):
            for event in watcher:
                if event.type == "DELETED":
                    raise ClusterError(f"run {run_name} was deleted")
                run = event.object
                if show(run):
                    watcher.stop()
                    break
    click.echo(_status_line(run))
    if (run.get("status") or {}).get("phase") != "Succeeded":
        sys.exit(1)


# ---- results ----------------------------------------------------------------------------------
def load_manifest(cluster: Cluster, run: dict[str, Any]) -> Any:
    from wpbench_k8s.kube.client import CONFIG_MAPS, KubeError
    from wpbench_k8s.kube.payload import PayloadError, join_manifest

    chunks = []
    for name in run["spec"]["payload"]["configMaps"]:
        try:
            cm = cluster.kube.get(CONFIG_MAPS, cluster.namespace, name)
        except KubeError as exc:
            raise _api_error(exc, f"payload ConfigMap {name}") from exc
        chunks.append(cm.get("data") or {})
    try:
        return join_manifest(chunks, run["spec"]["manifestDigest"]).manifest
    except PayloadError as exc:
        raise ClusterError(f"run {run['metadata']['name']}: {exc}") from exc


@click.command("results")
@click.argument("run_name")
@cluster_options
@click.option(
    "--output",
    "-o",
    "output",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="JSONL path; the summary JSON goes beside it (same stem, .json).",
)
@click.option("--report", "report", is_flag=True, help="Also write the HTML report beside the summary (.html).")
@unreachable_is_an_error
def results_command(
    run_name: str, kubeconfig: str | None, context: str | None, namespace: str | None, output: Path, report: bool
) -> None:
    """Fetch a run's records: the same JSONL (and summary JSON) a local `wpbench-k8s run` writes.

    A finished model run also prints the model comparison (Δ skills, Skill Impact) tables of a local
    run, on stdout. An unfinished run's records go to OUTPUT.partial (no summary), as a local run's do.
    With --report a finished run's HTML report goes beside the summary (same stem, .html).
    """
    from rich.console import Console

    from wpbench_k8s.kube.results import read_records
    from wpbench_k8s.local_run import mode_sections
    from wpbench_k8s.outputs import now_iso, summarize

    cluster = Cluster(kubeconfig, context, namespace)
    run = cluster.run(run_name)
    manifest = load_manifest(cluster, run)
    rank = {item.item_id: i for i, item in enumerate(manifest.items)}
    records = sorted(
        read_records(cluster.kube, cluster.namespace, run_name), key=lambda r: rank.get(r.item_id, len(rank))
    )
    status = run.get("status") or {}
    complete = status.get("phase") == "Succeeded" and len(records) == len(manifest.items)
    target = output if complete else output.with_name(output.name + ".partial")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("".join(json_line(r) + "\n" for r in records), encoding="utf-8")
    if complete:
        extra = mode_sections(manifest, records, Console())
        extra["cluster"] = {
            "namespace": cluster.namespace,
            "run": run_name,
            "infra_retries": status.get("infraRetries", 0),
        }
        summary = summarize(
            manifest,
            records,
            executor="kubernetes",
            started_at=status.get("startTime") or now_iso(),
            finished_at=status.get("completionTime") or now_iso(),
            extra=extra,
        )
        summary_path = output.with_suffix(".json")
        summary_path.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
        click.echo(f"{len(records)} records -> {target}; summary -> {summary_path}", err=True)
        if report:
            from wpbench_k8s.local_run import write_run_report

            click.echo(f"report: {write_run_report(manifest, summary_path, target)}", err=True)
    else:
        click.echo(
            f"run {run_name} is {status.get('phase', 'Pending')}: "
            f"{len(records)}/{len(manifest.items)} records -> {target}"
            + ("; no report for an unfinished run" if report else ""),
            err=True,
        )


# ---- logs -------------------------------------------------------------------------------------
@click.command("logs")
@click.argument("run_name")
@click.argument("test_id")
@cluster_options
@click.option("--model", help="Only this model's pod (model runs grade a test once per model).")
@unreachable_is_an_error
def logs_command(
    run_name: str, test_id: str, kubeconfig: str | None, context: str | None, namespace: str | None, model: str | None
) -> None:
    """Show the grader pod log of one test of a run (the stored verdict once the pod is gone)."""
    from wpbench_k8s.kube.client import PODS
    from wpbench_k8s.kube.facts import read_log
    from wpbench_k8s.kube.names import LABEL_MODEL, LABEL_RUN, LABEL_TEST, label_value
    from wpbench_k8s.kube.results import read_records

    cluster = Cluster(kubeconfig, context, namespace)
    selector = f"{LABEL_RUN}={label_value(run_name)},{LABEL_TEST}={label_value(test_id)}"
    if model:
        selector += f",{LABEL_MODEL}={label_value(model)}"
    click.echo(f"# kubectl logs -n {cluster.namespace} -l {selector} --tail=-1", err=True)
    pods = cluster.kube.items(PODS, cluster.namespace, selector=selector)
    shown = 0
    for pod in sorted(pods, key=lambda p: p["metadata"].get("creationTimestamp") or ""):
        data, error = read_log(cluster.kube, cluster.namespace, pod["metadata"]["name"], tries=1)
        text = data.decode("utf-8", "replace") if data is not None else f"(log not available: {error})\n"
        click.echo(f"==> pod {pod['metadata']['name']} ({(pod.get('status') or {}).get('phase')}) <==", err=True)
        click.echo(text, nl=not text.endswith("\n"))
        shown += 1
    if shown:
        return
    stored = [
        r
        for r in read_records(cluster.kube, cluster.namespace, run_name)
        if r.test_id == test_id and (model is None or r.model == model)
    ]
    if not stored:
        cluster.run(run_name)  # a clear error when the run itself is missing
        raise ClusterError(f"no pod and no stored result for test {test_id} in run {run_name}")
    for record in stored:
        click.echo(f"==> {record.item_id}: pod already collected; the stored verdict <==", err=True)
        doc = (
            record.grader.verdict.model_dump(mode="json")
            if record.grader.verdict
            else record.grader.model_dump(mode="json")
        )
        click.echo(json.dumps(doc, indent=2))


# ---- cancel -----------------------------------------------------------------------------------
@click.command("cancel")
@click.argument("run_name")
@cluster_options
@unreachable_is_an_error
def cancel_command(run_name: str, kubeconfig: str | None, context: str | None, namespace: str | None) -> None:
    """Stop a run: the controller deletes its running Jobs; stored results stay (`results` still works)."""
    from wpbench_k8s.kube.client import RUNS

    cluster = Cluster(kubeconfig, context, namespace)
    cluster.run(run_name)
    cluster.kube.patch(RUNS, cluster.namespace, run_name, {"spec": {"cancel": True}})
    click.echo(f"cancel requested for {cluster.namespace}/{run_name}")


commands = [submit_command, status_command, results_command, logs_command, cancel_command]
