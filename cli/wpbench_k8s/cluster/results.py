"""A run's records fetched from the cluster: the same JSONL and summary a local run writes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from wpbench_k8s.cluster.connection import Cluster, ClusterError, api_error
from wpbench_k8s.manifest import RunManifest
from wpbench_k8s.records import json_line


def load_manifest(cluster: Cluster, run: dict[str, Any]) -> RunManifest:
    """The run's manifest, reassembled from its payload ConfigMaps and checked against its digest.

    Raises:
        ClusterError: a ConfigMap is missing or the payload does not reassemble to the digest.
    """
    from wpbench_k8s.kube.client import CONFIG_MAPS, KubeError
    from wpbench_k8s.kube.payload import PayloadError, join_manifest

    chunks = []
    for name in run["spec"]["payload"]["configMaps"]:
        try:
            cm = cluster.kube.get(CONFIG_MAPS, cluster.namespace, name)
        except KubeError as exc:
            raise api_error(exc, f"payload ConfigMap {name}") from exc
        chunks.append(cm.get("data") or {})
    # The digest the controller accepted (status, the controller's alone) wins over the spec's.
    digest = (run.get("status") or {}).get("manifestDigest") or run["spec"]["manifestDigest"]
    try:
        return join_manifest(chunks, digest).manifest
    except PayloadError as exc:
        raise ClusterError(f"run {run['metadata']['name']}: {exc}") from exc


@dataclass(frozen=True)
class Fetched:
    phase: str
    records: int
    items: int
    records_path: Path  # OUTPUT, or OUTPUT.partial for an unfinished run
    summary_path: Path | None = None  # only for a finished run
    report_path: Path | None = None  # only when asked for and the run finished
    warnings: tuple[str, ...] = ()  # ConfigMaps that claimed to hold the run's results and were ignored
    suite: str = ""  # what the controller says about the suite graded (`suite_line`)


def suite_line(status: dict[str, Any]) -> str:
    """The suite the controller verified, its digest, and whether a cluster admin pinned it."""
    if not status.get("suiteDigest"):
        return "suite: not verified by the controller (it predates verified suites, or the run was refused)"
    pinned = ("verified: pinned by the cluster admin (trustedSuites)" if status.get("suiteVerified")
              else "not verified: no cluster admin pinned this suite with this digest (trustedSuites)")  # fmt: skip
    return f"suite {status.get('suite', '')} {status['suiteDigest']}: {pinned}"


def fetch_results(cluster: Cluster, name: str, output: Path, *, report: bool, console: Console) -> Fetched:
    """Write a run's records to `output` (in manifest order) and, once it finished, the summary beside it
    (same stem, .json), the model comparison tables on `console`, and with `report` the HTML report.
    An unfinished run's records go to OUTPUT.partial, as a local run's do."""
    from wpbench_k8s.cache import CACHED_MODES
    from wpbench_k8s.kube.results import read_records
    from wpbench_k8s.outputs import atomic_write, now_iso
    from wpbench_k8s.report import write_run_report
    from wpbench_k8s.summary import CacheFacts, ClusterFacts, RunFacts, build_summary
    from wpbench_k8s.summary.console import print_model_tables

    run = cluster.run(name)
    manifest = load_manifest(cluster, run)
    rank = {item.item_id: i for i, item in enumerate(manifest.items)}
    ignored: list[str] = []
    stored = read_records(cluster.kube, cluster.namespace, run, ignored)
    records = sorted(stored, key=lambda r: rank.get(r.item_id, len(rank)))
    warnings = tuple(f"ignored ConfigMap {n}: it claims to hold results of run {name}, but the controller never "
                     "listed it (status.resultConfigMaps); someone other than the controller wrote it"
                     for n in ignored)  # fmt: skip
    status = run.get("status") or {}
    suite = suite_line(status)
    phase = status.get("phase", "Pending")
    complete = phase == "Succeeded" and len(records) == len(manifest.items)
    target = output if complete else output.with_name(output.name + ".partial")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("".join(json_line(r) + "\n" for r in records), encoding="utf-8")
    fetched = Fetched(phase, len(records), len(manifest.items), target, warnings=warnings, suite=suite)
    if not complete:
        return fetched
    cluster_facts = ClusterFacts(
        namespace=cluster.namespace,
        run=name,
        infra_retries=status.get("infraRetries", 0),
        requeued=status.get("requeued", 0),
        suite_digest=status.get("suiteDigest") or "",
        suite_verified=bool(status.get("suiteVerified")),
        # submit resolves no image id (it may not see the nodes' images): the kubelet's
        grader_image_id=status.get("graderImageID", ""),
    )
    facts = RunFacts(executor="kubernetes", started_at=status.get("startTime") or now_iso(),
                     finished_at=status.get("completionTime") or now_iso(),
                     cache=CacheFacts(enabled=run["spec"].get("cache", True) is not False
                                      and manifest.mode in CACHED_MODES),
                     cluster=cluster_facts)  # fmt: skip
    summary = build_summary(manifest, records, facts)
    print_model_tables(summary, console)
    summary_path = output.with_suffix(".json")
    atomic_write(summary_path, summary.to_json())
    report_path = write_run_report(manifest, summary_path, target) if report else None
    return Fetched(phase, len(records), len(manifest.items), target, summary_path, report_path, warnings, suite)
