"""Grader Jobs whose Kueue Workload was deactivated end as infrastructure instead of waiting forever.

Kueue deactivates a Workload (`spec.active: false`) when it gives up on it (the requeuing limit of
waitForPodsReady, a maximum execution time) or when an admin does; its Job then stays suspended and is
never admitted again. This watch of the run namespaces' Workloads marks such a grader Job with the
annotation `ANNOTATION_KUEUE_DEACTIVATED` (the reason Kueue gives) and requeues its run: the facts read
the mark as an attempt that did not run (`kube.facts.status_facts`), so the reconciler retries it or
ends the item as infra_error, as for any other infrastructure failure. Only Jobs this project made and
that have not ended are marked. Nothing runs where the Kueue API is not served.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from wpbench_k8s.kube.client import JOBS, Kind, Kube, KubeError, NotFound, WatchEvent
from wpbench_k8s.kube.facts import condition
from wpbench_k8s.kube.names import (
    ANNOTATION_KUEUE_DEACTIVATED,
    COMPONENT_GRADER,
    LABEL_RUN,
    MANAGED_BY,
)

log = logging.getLogger(__name__)
WORKLOADS = Kind("kueue.x-k8s.io/v1beta2", "workloads")


def served(kube: Kube) -> bool:
    """Whether the API server serves Kueue's Workloads (Kueue installed)."""
    try:
        resources = kube.api_resources(WORKLOADS.api_version)
    except KubeError:
        return False
    return WORKLOADS.plural in resources


def readable(kube: Kube, namespace: str) -> bool:
    """Whether this controller may list the namespace's Workloads (a Role from an older chart may not):
    without that, a watch would only fail and retry."""
    try:
        next(kube.pages(WORKLOADS, namespace, limit=1), None)
    except KubeError as exc:
        log.warning("namespace %s: Kueue Workloads not readable (%s): a deactivated one is not noticed", namespace, exc)
        return False
    return True


def deactivation(workload: dict[str, Any]) -> str:
    """Why the Workload is deactivated, in Kueue's words ('' while it is active)."""
    if (workload.get("spec") or {}).get("active", True) is not False:
        return ""
    for kind in ("Evicted", "DeactivationTarget", "Requeued"):
        cond = condition(workload, kind) if kind != "Requeued" else _false(workload, kind)
        if cond:
            return f"{cond.get('reason', kind)}: {cond.get('message', '')}".rstrip(": ")[:500]
    return "spec.active is false"


def _false(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind and cond.get("status") == "False":
            return dict(cond)
    return None


def _owner_job(workload: dict[str, Any]) -> str:
    for ref in workload["metadata"].get("ownerReferences") or []:
        if ref.get("kind") == "Job" and str(ref.get("apiVersion", "")).startswith("batch/"):
            return str(ref.get("name", ""))
    return ""


class Deactivations:
    """Turns Workload events of one namespace into marked grader Jobs; `requeue(namespace, run)` after each."""

    def __init__(self, kube: Kube, requeue: Callable[[str, str], None]) -> None:
        self.kube = kube
        self.requeue = requeue
        self._marked: set[str] = set()  # Job uids marked by this process

    def on_event(self, namespace: str, event: WatchEvent) -> None:
        if event.type == "DELETED":
            return
        why = deactivation(event.object)
        name = _owner_job(event.object)
        if not why or not name:
            return
        try:
            self._mark(namespace, name, why)
        except KubeError as exc:  # the next event or relist of the Workload tries again
            log.warning("grader Job %s/%s: Kueue deactivated its Workload; not marked yet: %s", namespace, name, exc)

    def _mark(self, namespace: str, name: str, why: str) -> None:
        try:
            job = self.kube.get(JOBS, namespace, name)
        except NotFound:
            return
        meta = job["metadata"]
        labels = meta.get("labels") or {}
        ours = labels.get("app.kubernetes.io/managed-by") == MANAGED_BY and (
            labels.get("app.kubernetes.io/component") == COMPONENT_GRADER
        )
        if not ours or meta.get("uid") in self._marked or condition(job, "Complete") or condition(job, "Failed"):
            return
        if ANNOTATION_KUEUE_DEACTIVATED not in (meta.get("annotations") or {}):
            # an annotation only: a Job that ended meanwhile keeps its own end (the facts read that first)
            self.kube.patch(JOBS, namespace, name, {"metadata": {"annotations": {ANNOTATION_KUEUE_DEACTIVATED: why}}})
            where = {"namespace": namespace, "run": labels.get(LABEL_RUN, "")}
            log.warning("grader Job %s: Kueue deactivated its Workload (%s): the attempt ends as infrastructure",
                        name, why, extra=where)  # fmt: skip
        self._marked.add(str(meta.get("uid")))
        if labels.get(LABEL_RUN):
            self.requeue(namespace, labels[LABEL_RUN])
