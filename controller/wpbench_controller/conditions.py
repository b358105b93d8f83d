"""A run's status.conditions and its Events: what `kubectl wait` and `kubectl describe` read.

Conditions follow the API conventions (type, status, reason, message, observedGeneration,
lastTransitionTime, which only moves when the status does). They are derived from the phase alone, in
one place, so they can never disagree with it:

    phase       Ready  Running  Succeeded  Failed
    Pending     False  False    False      False
    Running     True   True     False      False
    Succeeded   True   False    True       False
    Failed      *      False    False      True     (* False when the run was never accepted: invalid payload)
    Cancelled   True   False    False      False

Events are for people: the run's lifecycle (Accepted, Cancelled, Finished) from condition transitions,
and per pass one event each for attempts retried and items ended as infra_error. An event that cannot be
written is logged and dropped: it is explanation, never state.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from wpbench_k8s.kube import crd
from wpbench_k8s.kube.client import EVENTS, Kube, KubeError

log = logging.getLogger(__name__)

TYPES = ("Ready", "Running", "Succeeded", "Failed")
COMPONENT = "wpbench-controller"
_MESSAGE_LIMIT = 1024  # an Event's message is cut by the API server past this


def _table(phase: str, accepted: bool) -> dict[str, bool]:
    return {
        "Ready": accepted and phase != "Pending",
        "Running": phase == "Running",
        "Succeeded": phase == "Succeeded",
        "Failed": phase == "Failed",
    }


def run_conditions(
    old: list[dict[str, Any]] | None, phase: str, reason: str, message: str, generation: int, now: str
) -> list[dict[str, Any]]:
    """The four conditions for `phase`. `reason` (CamelCase) explains the condition that holds (and the
    False ones of a finished run); a condition whose status is unchanged keeps its lastTransitionTime."""
    before = {c.get("type"): c for c in old or []}
    accepted = reason != "InvalidPayload"
    truth = _table(phase, accepted)
    out: list[dict[str, Any]] = []
    for kind in TYPES:
        status = "True" if truth[kind] else "False"
        if kind == "Ready":
            why = "Accepted" if truth[kind] else ("InvalidPayload" if not accepted else "WaitingForPayload")
            text = "the controller indexed the run's payload" if truth[kind] else message
        else:
            why = reason if truth[kind] or phase in crd.TERMINAL_PHASES else phase
            text = message
        prev = before.get(kind) or {}
        since = prev.get("lastTransitionTime") if prev.get("status") == status else None
        out.append(
            {
                "type": kind,
                "status": status,
                "reason": why,
                "message": text[:_MESSAGE_LIMIT],
                "observedGeneration": generation,
                "lastTransitionTime": since or now,
            }
        )
    return out


def is_true(conditions: list[dict[str, Any]] | None, kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions or [])


def lifecycle_events(
    old: list[dict[str, Any]] | None, new: list[dict[str, Any]], old_phase: str, phase: str
) -> list[tuple[str, str]]:
    """(type, reason) of the events a status change calls for: Accepted once, Cancelled or Finished once."""
    events: list[tuple[str, str]] = []
    if is_true(new, "Ready") and not is_true(old, "Ready"):
        events.append(("Normal", "Accepted"))
    if phase in crd.TERMINAL_PHASES and phase != old_phase:
        if phase == "Cancelled":
            events.append(("Normal", "Cancelled"))
        else:
            events.append(("Normal" if phase == "Succeeded" else "Warning", "Finished"))
    return events


class Recorder:
    """Writes core/v1 Events about runs (the kind `kubectl describe` and `kubectl events` show)."""

    def __init__(self, kube: Kube, instance: str | None = None) -> None:
        self.kube = kube
        self.instance = instance or os.environ.get("HOSTNAME", "") or COMPONENT

    def emit(self, run: dict[str, Any], kind: str, reason: str, message: str, now: str) -> None:
        meta = run["metadata"]
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
            "involvedObject": {
                "apiVersion": crd.API_VERSION,
                "kind": crd.KIND,
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta.get("uid", ""),
            },
            "type": kind,
            "reason": reason,
            "message": message[:_MESSAGE_LIMIT],
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "source": {"component": COMPONENT},
            "reportingComponent": f"{crd.GROUP}/controller",
            "reportingInstance": self.instance[:128],
        }
        try:
            self.kube.create(EVENTS, meta["namespace"], body)
        except KubeError as exc:
            log.warning("run %s/%s: event %s not written: %s", meta["namespace"], meta["name"], reason, exc)


def summarise(what: str, entries: list[tuple[str, str]], limit: int = 5) -> str:
    """'3 attempt(s) retried as infrastructure: a (why); b (why); ... and 1 more'."""
    shown = "; ".join(f"{item} ({why[:160]})" for item, why in entries[:limit])
    more = f"; and {len(entries) - limit} more" if len(entries) > limit else ""
    return f"{len(entries)} {what}: {shown}{more}"
