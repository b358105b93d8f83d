"""Requeue: the cluster's `run --resume`. A finished run's infra errors (and items a cancel left) are graded
again by the controller; final verdicts stay as they are."""

from __future__ import annotations

from dataclasses import dataclass

from wpbench_k8s.cluster.connection import Cluster, ClusterError
from wpbench_k8s.errors import InputError


@dataclass(frozen=True)
class Requeued:
    infra_errors: int  # records dropped so their items are graded again
    never_graded: int  # items without a record (a cancelled or stopped run)

    @property
    def nothing(self) -> bool:
        return not self.infra_errors and not self.never_graded


def requeue(cluster: Cluster, name: str) -> Requeued:
    """Ask the controller to open a finished run again (`spec.requeue` raised by one).

    Raises:
        InputError: no such run, or it has not finished (exit 2).
        ClusterError: the run changed meanwhile, or the cluster's CRD predates requeue.
    """
    from wpbench_k8s.kube import crd
    from wpbench_k8s.kube.client import RUNS, Conflict, NotFound
    from wpbench_k8s.kube.results import read_records

    where = f"{cluster.namespace}/{name}"
    try:
        run = cluster.kube.get(RUNS, cluster.namespace, name)
    except NotFound as exc:
        raise InputError(f"requeue {name}: no run {where} (wpbench-k8s submit makes one)") from exc
    status = run.get("status") or {}
    phase = status.get("phase") or "Pending"
    asked = int(run["spec"].get("requeue") or 0)
    if phase not in crd.TERMINAL_PHASES or asked > int(status.get("requeued") or 0):
        raise InputError(f"requeue {name}: run {where} is {phase}; requeue a finished run "
                         f"(follow it with: wpbench-k8s status {name} --watch)")  # fmt: skip
    stored = list(read_records(cluster.kube, cluster.namespace, run))
    total = int(status.get("total") or run["spec"].get("items") or 0)
    found = Requeued(sum(r.grader.status == "infra_error" for r in stored), max(0, total - len(stored)))
    if found.nothing:
        return found
    body = {"metadata": {"resourceVersion": run["metadata"]["resourceVersion"]},
            "spec": {"requeue": asked + 1, "cancel": False}}  # fmt: skip
    try:
        patched = cluster.kube.patch(RUNS, cluster.namespace, name, body)
    except Conflict as exc:
        raise ClusterError(f"requeue {name}: run {where} changed meanwhile; try again") from exc
    if patched["spec"].get("requeue") != asked + 1:
        raise ClusterError(f"requeue {name}: this cluster's WPBenchRun CRD has no spec.requeue; upgrade the "
                           "chart (0.2.2 or later) and its controller")  # fmt: skip
    return found
