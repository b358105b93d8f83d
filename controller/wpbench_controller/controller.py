"""The controller process: watches feed a work queue of runs; one worker reconciles them.

Watches (runs and grader Jobs, per namespace: `kube.client.Watcher`) only say *which* run to look
at; the reconciler always reads the current state itself (level-triggered). A periodic resync
enqueues every run, so a missed event costs at most `resync_seconds`. Model calls run in a bounded
pool beside the worker. Every API request has a timeout, so the worker's loop always comes round:
`alive()` (the liveness probe) says whether it did recently.
"""

from __future__ import annotations

import heapq
import logging
import threading
import time
from collections.abc import Iterable
from functools import partial
from typing import Any

from wpbench_controller.generation import GenerationPool
from wpbench_controller.kueue import WORKLOADS, Deactivations, readable, served
from wpbench_controller.logs import reconciling
from wpbench_controller.metrics import Metrics
from wpbench_controller.reconciler import Options, Reconciler
from wpbench_k8s.kube.client import JOBS, RUNS, Kind, Kube, Watcher, WatchEvent
from wpbench_k8s.kube.names import LABEL_RUN, managed_graders_selector

log = logging.getLogger(__name__)
Key = tuple[str, str]  # (namespace, run name)


class WorkQueue:
    """Run keys to reconcile: deduplicated, with delayed re-adds; one key is never processed twice at once."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._ready: list[Key] = []
        self._queued: set[Key] = set()
        self._delayed: list[tuple[float, Key]] = []
        self.closed = False

    def add(self, key: Key, after: float = 0.0) -> None:
        with self._cond:
            if after > 0:
                heapq.heappush(self._delayed, (time.monotonic() + after, key))
            elif key not in self._queued:
                self._queued.add(key)
                self._ready.append(key)
            self._cond.notify()

    def get(self, timeout: float = 1.0) -> Key | None:
        end = time.monotonic() + timeout
        with self._cond:
            while True:
                now = time.monotonic()
                while self._delayed and self._delayed[0][0] <= now:
                    _, key = heapq.heappop(self._delayed)
                    if key not in self._queued:
                        self._queued.add(key)
                        self._ready.append(key)
                if self._ready:
                    key = self._ready.pop(0)
                    self._queued.discard(key)
                    return key
                if self.closed or now >= end:
                    return None
                wait = end - now
                if self._delayed:
                    wait = min(wait, self._delayed[0][0] - now)
                self._cond.wait(max(0.01, wait))

    def close(self) -> None:
        with self._cond:
            self.closed = True
            self._cond.notify_all()


class Controller:
    """Reconciles WPBenchRuns in `namespaces` until `stop()`."""

    def __init__(
        self,
        kube: Kube,
        namespaces: Iterable[str],
        *,
        options: Options | None = None,
        resync_seconds: float = 30.0,
        model_workers: int = 4,
        liveness_seconds: float = 300.0,
        metrics: Metrics | None = None,
    ) -> None:
        """`metrics`: fed from the watches and the work loop (give the same to `kube` as its observer)."""
        self.kube = kube
        self.metrics = metrics or Metrics()
        self.namespaces = list(namespaces)
        self.queue = WorkQueue()
        self.generations = GenerationPool(model_workers, notify=self.queue.add)
        self.reconciler = Reconciler(kube, options, self.generations)
        self.resync_seconds = resync_seconds
        self.liveness_seconds = liveness_seconds
        self._stop = threading.Event()
        self._watchers: list[Watcher] = []
        self._threads: list[threading.Thread] = []
        self.healthy = threading.Event()  # ready: watches started
        self._beat = time.monotonic()

    def alive(self) -> bool:
        """The worker's loop came round within `liveness_seconds` (no request can block it for longer)."""
        return time.monotonic() - self._beat < self.liveness_seconds

    # ---- watches --------------------------------------------------------------------------
    def _follow(self, watcher: Watcher, on_event: Any) -> None:
        for event in watcher:
            on_event(event)

    def _start_watches(self) -> None:
        metrics = self.metrics
        deactivations = Deactivations(self.kube, lambda ns, run: self.queue.add((ns, run)))
        with_kueue = served(self.kube)
        for ns in self.namespaces:

            def on_run(event: WatchEvent, ns: str = ns) -> None:
                metrics.run_event(ns, event)
                self.queue.add((ns, event.object["metadata"]["name"]))

            def on_job(event: WatchEvent, ns: str = ns) -> None:
                metrics.job_event(ns, event)
                run = (event.object["metadata"].get("labels") or {}).get(LABEL_RUN)
                if run:
                    self.queue.add((ns, run))

            watches: list[tuple[str, Kind, str | None, Any, Any]] = [
                ("runs", RUNS, None, on_run, partial(metrics.runs_listed, ns)),
                ("jobs", JOBS, managed_graders_selector(), on_job, partial(metrics.jobs_listed, ns)),
            ]
            if with_kueue and readable(self.kube, ns):  # a Job whose Workload Kueue deactivated ends as infra
                watches.append(("workloads", WORKLOADS, None, partial(deactivations.on_event, ns), None))
            for what, kind, selector, handler, listed in watches:
                watcher = Watcher(self.kube, kind, ns, selector=selector, on_list=listed)
                self._watchers.append(watcher)
                self._spawn(f"watch-{what}-{ns}", self._follow, watcher, handler)

    def _spawn(self, name: str, target: Any, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _resync(self) -> None:
        while not self._stop.wait(self.resync_seconds):
            for ns in self.namespaces:
                try:
                    runs = self.kube.items(RUNS, ns)
                except Exception as exc:
                    log.warning("resync %s: %s", ns, exc)
                    continue
                for run in runs:
                    self.queue.add((ns, run["metadata"]["name"]))

    # ---- the worker -----------------------------------------------------------------------
    def run(self) -> None:
        """Watch and reconcile until `stop()` (blocking)."""
        log.info("controller watching namespaces: %s", ", ".join(self.namespaces))
        self._start_watches()
        self._spawn("resync", self._resync)
        self.healthy.set()
        failures: dict[Key, int] = {}
        while not self._stop.is_set():
            self._beat = time.monotonic()
            key = self.queue.get(timeout=0.5)
            if key is None:
                continue
            started = time.monotonic()
            try:
                with reconciling(*key):
                    again = self.reconciler.reconcile(*key)
                failures.pop(key, None)
                self.metrics.reconciled(time.monotonic() - started, ok=True)
            except Exception:
                self.metrics.reconciled(time.monotonic() - started, ok=False)
                n = failures[key] = failures.get(key, 0) + 1
                again = min(30.0, 0.5 * 2**n)
                with reconciling(*key):
                    log.exception("reconcile %s/%s failed (attempt %d); retrying in %.1fs", *key, n, again)
            if again is not None:
                self.queue.add(key, after=again)
        self.generations.shutdown()
        log.info("controller stopped")

    def stop(self) -> None:
        self._stop.set()
        self.queue.close()
        for watcher in list(self._watchers):
            watcher.stop()
