"""The controller's Prometheus metrics (served on `/metrics` beside the health probes).

Everything here is fed from outside the reconciler's decisions: the watches the controller already runs
(runs and grader Jobs: their phases, counters and times), the work loop (each pass's duration and
outcome), and the API client (`kube.client.Observer`: every request's verb, resource and code, and each
429 it waited out). So a metric can never change what the controller decides, and the reconciler needs
no knowledge of it.

Gauges describe the objects as the watches last saw them (a relist replaces a namespace's set);
counters and the histogram count what this process saw since it started, as Prometheus expects.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from wpbench_k8s.kube.client import WatchEvent
from wpbench_k8s.kube.facts import condition
from wpbench_k8s.kube.names import LABEL_ATTEMPT

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
PHASES = ("Pending", "Running", "Succeeded", "Failed", "Cancelled")
# Run status counters -> the item status they count (pending: total - done).
ITEM_STATUSES = {"passed": "passed", "failed": "failed", "errors": "error", "infraErrors": "infra_error"}
GRADING_BUCKETS = (1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 3600)
PASS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


def _time(value: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")) if value else None
    except ValueError:
        return None


def job_duration(job: dict[str, Any]) -> tuple[str, float] | None:
    """(outcome, seconds from the Job's start to its Complete/Failed condition), or None while it runs."""
    for outcome in ("Complete", "Failed"):
        ended = condition(job, outcome)
        if ended:
            start = _time((job.get("status") or {}).get("startTime"))
            end = _time(ended.get("lastTransitionTime"))
            if start is None or end is None:
                return None
            return outcome, max(0.0, (end - start).total_seconds())
    return None


class Metrics:
    """One registry of the controller's metrics, and the feeds that update it (thread-safe)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.runs = Gauge("wpbench_runs", "WPBenchRuns by phase", ["namespace", "phase"], registry=r)
        self.items = Gauge(
            "wpbench_items", "Items of the runs present, by status (pending: no record yet)",
            ["namespace", "status"], registry=r,
        )  # fmt: skip
        self.jobs = Gauge(
            "wpbench_grader_jobs", "Grader Jobs not finished: queued (suspended, Kueue) or active",
            ["namespace", "state"], registry=r,
        )  # fmt: skip
        self.infra_retries = Counter(
            "wpbench_infra_retries", "Grader attempts started again after an infrastructure failure",
            ["namespace"], registry=r,
        )  # fmt: skip
        self.grading = Histogram(
            "wpbench_grading_duration_seconds", "Grader Jobs, from their start to Complete or Failed",
            ["namespace", "outcome"], buckets=GRADING_BUCKETS, registry=r,
        )  # fmt: skip
        self.api_requests = Counter(
            "wpbench_api_requests", "Requests to the API server by verb, resource and HTTP code (none: no answer)",
            ["verb", "resource", "code"], registry=r,
        )  # fmt: skip
        self.api_throttled = Counter(
            "wpbench_api_throttled", "429 answers (API Priority and Fairness) the client waited out and sent again",
            ["verb", "resource"], registry=r,
        )  # fmt: skip
        self.api_throttle_wait = Counter(
            "wpbench_api_throttle_wait_seconds", "Seconds waited on Retry-After", registry=r
        )
        self.passes = Counter("wpbench_reconcile_passes", "Reconcile passes by result", ["result"], registry=r)
        self.pass_seconds = Histogram(
            "wpbench_reconcile_pass_duration_seconds", "One reconcile pass of one run", buckets=PASS_BUCKETS,
            registry=r,
        )  # fmt: skip
        self._lock = threading.Lock()
        self._runs: dict[str, dict[str, dict[str, Any]]] = {}  # namespace -> run name -> status
        self._jobs: dict[str, dict[str, str]] = {}  # namespace -> Job uid -> state
        self._ended: set[str] = set()  # Job uids whose duration was observed (until they are deleted)
        self._run_labels: set[tuple[str, str]] = set()
        self._item_labels: set[tuple[str, str]] = set()
        self._job_labels: set[tuple[str, str]] = set()

    def render(self) -> bytes:
        return generate_latest(self.registry)

    # ---- the API client (kube.client.Observer) --------------------------------------------------
    def request(self, verb: str, resource: str, code: int | None) -> None:
        self.api_requests.labels(verb, resource, str(code) if code is not None else "none").inc()

    def throttled(self, verb: str, resource: str, wait: float) -> None:
        self.api_throttled.labels(verb, resource).inc()
        self.api_throttle_wait.inc(wait)

    # ---- the work loop ----------------------------------------------------------------------------
    def reconciled(self, seconds: float, ok: bool) -> None:
        self.passes.labels("ok" if ok else "error").inc()
        self.pass_seconds.observe(seconds)

    # ---- the run watch ----------------------------------------------------------------------------
    def runs_listed(self, namespace: str, runs: Iterable[dict[str, Any]]) -> None:
        with self._lock:
            self._runs[namespace] = {r["metadata"]["name"]: dict(r.get("status") or {}) for r in runs}
            self._publish_runs()

    def run_event(self, namespace: str, event: WatchEvent) -> None:
        if event.type == "LISTED":  # runs_listed has them
            return
        name = event.object["metadata"]["name"]
        with self._lock:
            runs = self._runs.setdefault(namespace, {})
            if event.type == "DELETED":
                runs.pop(name, None)
            else:
                runs[name] = dict(event.object.get("status") or {})
            self._publish_runs()

    def _publish_runs(self) -> None:
        phases: dict[tuple[str, str], int] = {}
        items: dict[tuple[str, str], int] = {}
        for namespace, runs in self._runs.items():
            for status in runs.values():
                key = (namespace, str(status.get("phase") or "Pending"))
                phases[key] = phases.get(key, 0) + 1
                total, done = int(status.get("total") or 0), int(status.get("done") or 0)
                pending = (namespace, "pending")
                items[pending] = items.get(pending, 0) + max(0, total - done)
                for field, item_status in ITEM_STATUSES.items():
                    key = (namespace, item_status)
                    items[key] = items.get(key, 0) + int(status.get(field) or 0)
        for namespace in self._runs:  # every phase shows, 0 when no run is in it
            for phase in PHASES:
                phases.setdefault((namespace, phase), 0)
        self._run_labels = _set(self.runs, phases, self._run_labels)
        self._item_labels = _set(self.items, items, self._item_labels)

    # ---- the grader Job watch ---------------------------------------------------------------------
    def jobs_listed(self, namespace: str, jobs: Iterable[dict[str, Any]]) -> None:
        with self._lock:
            self._jobs[namespace] = {}
            for job in jobs:
                self._track(namespace, job)
            self._publish_jobs()

    def job_event(self, namespace: str, event: WatchEvent) -> None:
        if event.type == "LISTED":  # jobs_listed has them; a Job that ended before is not timed again
            return
        job = event.object
        uid = str(job["metadata"].get("uid", ""))
        with self._lock:
            if event.type == "DELETED":
                self._jobs.setdefault(namespace, {}).pop(uid, None)
                self._ended.discard(uid)
            else:
                if event.type == "ADDED" and _attempt(job) > 1:
                    self.infra_retries.labels(namespace).inc()
                ended = job_duration(job)
                if ended is not None and uid not in self._ended:
                    self._ended.add(uid)
                    self.grading.labels(namespace, ended[0]).observe(ended[1])
                self._track(namespace, job)
            self._publish_jobs()

    def _track(self, namespace: str, job: dict[str, Any]) -> None:
        uid = str(job["metadata"].get("uid", ""))
        jobs = self._jobs.setdefault(namespace, {})
        if condition(job, "Complete") or condition(job, "Failed"):
            jobs.pop(uid, None)
        else:
            jobs[uid] = "queued" if (job.get("spec") or {}).get("suspend") else "active"

    def _publish_jobs(self) -> None:
        counts: dict[tuple[str, str], int] = {}
        for namespace, jobs in self._jobs.items():
            for state in ("queued", "active"):
                counts[(namespace, state)] = 0
            for state in jobs.values():
                counts[(namespace, state)] += 1
        self._job_labels = _set(self.jobs, counts, self._job_labels)


def _attempt(job: dict[str, Any]) -> int:
    try:
        return int((job["metadata"].get("labels") or {}).get(LABEL_ATTEMPT, "1"))
    except ValueError:
        return 1


def _set(gauge: Gauge, values: dict[tuple[str, str], int], before: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """Set a gauge's labelled values; label sets that disappeared (a namespace relisted empty) go to 0."""
    for labels in before - set(values):
        gauge.labels(*labels).set(0)
    for labels, value in values.items():
        gauge.labels(*labels).set(value)
    return set(values) | before
