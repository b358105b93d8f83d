"""The controller process: watches feed a work queue of runs; one worker reconciles them.

Watches (runs and grader Jobs, per namespace: `kube.client.Watcher`) only say *which* run to look
at; the reconciler always reads the current state itself (level-triggered): grader Jobs and pods from the
stores those watches (and a grader pods watch) keep (`informer.py`), the rest from the API server. A watch
handler that raises is logged; its watch goes on. A periodic resync
enqueues every run, so a missed event costs at most `resync_seconds`. Model calls run in a bounded
pool beside the worker. Every API request has a timeout, so the worker's loop always comes round:
`alive()` (the liveness probe) says whether it did recently.

With an `Elector` (leader election, `leader.py`) every replica watches, but only the leader reconciles: a
standby drains its queue without acting. Each leadership term starts from a new reconciler (no state of an
earlier term, when another replica may have written), with every run enqueued. With an `instance` id, a run
belongs to the instance that accepted it (`status.controller`, set once with the run's resourceVersion as
precondition, so two instances racing for a new run cannot both win); runs of other instances are ignored.
Namespaces are the fixed list plus, with `namespace_selector`, every namespace carrying those labels, followed
by a watch (and each resync), so a namespace labelled later is served without a restart.
"""

from __future__ import annotations

import contextlib
import heapq
import logging
import threading
import time
from collections.abc import Iterable
from functools import partial
from typing import Any

from wpbench_controller.generation import GenerationPool
from wpbench_controller.informer import Informers
from wpbench_controller.kueue import WORKLOADS, Deactivations, readable, served
from wpbench_controller.leader import Elector
from wpbench_controller.logs import reconciling
from wpbench_controller.metrics import Metrics
from wpbench_controller.observed import observe_job, observe_run
from wpbench_controller.reconciler import Options, Reconciler
from wpbench_k8s.kube.client import (
    JOBS,
    NAMESPACES,
    PODS,
    RUNS,
    Conflict,
    Fenced,
    Kind,
    Kube,
    KubeError,
    NotFound,
    Watcher,
    WatchEvent,
)
from wpbench_k8s.kube.names import managed_graders_selector

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
    """Reconciles WPBenchRuns in `namespaces` (and those matching `namespace_selector`) until `stop()`."""

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
        elector: Elector | None = None,
        instance: str = "",
        namespace_selector: str = "",
    ) -> None:
        """`metrics`: fed from the watches and the work loop (give the same to `kube` as its observer)."""
        self.kube = kube
        self.metrics = metrics or Metrics()
        self.namespaces = list(namespaces)
        self.options = options
        self.model_workers = model_workers
        self.queue = WorkQueue()
        self.generations = GenerationPool(model_workers, notify=self.queue.add)
        self.informers = Informers()  # grader Jobs and pods per namespace, from the watches (every term reads them)
        self.reconciler = Reconciler(kube, options, self.generations, self.informers)
        self.resync_seconds = resync_seconds
        self.liveness_seconds = liveness_seconds
        self.elector = elector
        self.instance = instance
        self.namespace_selector = namespace_selector
        self._stop = threading.Event()
        self._lock = threading.Lock()  # guards _watchers and _tenants (watch threads, resync, worker)
        self._watchers: dict[str, list[Watcher]] = {}  # namespace -> its watches
        self._tenants: set[str] = set()  # namespaces served because they match the selector
        self._owners: dict[Key, str] = {}  # run -> status.controller as last seen ("" unclaimed)
        self._deactivations = Deactivations(kube, lambda ns, run: self.queue.add((ns, run)))
        self._with_kueue = False  # learnt when the watches start
        self._threads: list[threading.Thread] = []
        self.healthy = threading.Event()  # ready: watches started
        self._beat = time.monotonic()

    def alive(self) -> bool:
        """The worker's loop (and the leader election's) came round within `liveness_seconds` (no request can
        block them for longer). A standby is alive: it is not leading, not stuck."""
        worker = time.monotonic() - self._beat < self.liveness_seconds
        return worker and (self.elector is None or self.elector.alive(self.liveness_seconds))

    def leading(self) -> bool:
        return self.elector is None or self.elector.leading()

    def served(self) -> list[str]:
        """The namespaces served now: the fixed list, then those matching the selector."""
        with self._lock:
            return self.namespaces + sorted(self._tenants - set(self.namespaces))

    # ---- watches --------------------------------------------------------------------------
    def _follow(self, watcher: Watcher, on_event: Any) -> None:
        """Feed a watch's events to `on_event` until the watch stops. A handler that raises is logged and the
        watch goes on: one bad event never ends the thread (its run is still seen at the next resync)."""
        for event in watcher:
            try:
                on_event(event)
            except Exception:
                name = (event.object.get("metadata") or {}).get("name", "?")
                log.exception("watch %s %s: handling %s %s failed; the watch goes on",
                              watcher.kind.plural, watcher.namespace or "", event.type, name)  # fmt: skip

    def _serve(self, ns: str, retry_seconds: float = 1.0) -> None:
        """Start the run and Job watches of `ns` (once)."""
        with self._lock:
            if ns in self._watchers:
                return
            self._watchers[ns] = []

        metrics = self.metrics
        jobs, pods = self.informers.serve(ns)

        def on_run(event: WatchEvent) -> None:
            metrics.run_event(ns, event)
            run = observe_run(event.object)
            if not run.name:
                return
            key = (ns, run.name)
            owner = run.controller
            self._owners[key] = owner
            if not self.instance or owner in ("", self.instance):
                self.queue.add(key)

        def on_job(event: WatchEvent) -> None:
            jobs.apply(event)  # before the run is enqueued: its pass reads the store
            metrics.job_event(ns, event)
            run = observe_job(event.object).run
            if run:
                self.queue.add((ns, run))

        def jobs_listed(listed: list[dict[str, Any]]) -> None:
            jobs.replace(listed)
            metrics.jobs_listed(ns, listed)

        def on_workload(event: WatchEvent) -> None:
            with contextlib.suppress(Fenced):  # a standby marks nothing: the leader does
                self._deactivations.on_event(ns, event)

        watches: list[tuple[str, Kind, str | None, Any, Any]] = [
            ("runs", RUNS, None, on_run, partial(metrics.runs_listed, ns)),
            ("jobs", JOBS, managed_graders_selector(), on_job, jobs_listed),
            ("pods", PODS, managed_graders_selector(), pods.apply, pods.replace),  # grader pods only
        ]
        if self._with_kueue and readable(self.kube, ns):  # a Job whose Workload Kueue deactivated ends as infra
            watches.append(("workloads", WORKLOADS, None, on_workload, None))
        for what, kind, selector, handler, listed in watches:
            watcher = Watcher(self.kube, kind, ns, selector=selector, retry_seconds=retry_seconds, on_list=listed)
            with self._lock:
                started = self._watchers.get(ns)
                if started is None:  # unserved meanwhile (its label went)
                    return
                started.append(watcher)
            self._spawn(f"watch-{what}-{ns}", self._follow, watcher, handler)

    def _unserve(self, ns: str) -> None:
        """Stop serving a namespace that no longer matches the selector (its runs are left as they are)."""
        with self._lock:
            self._tenants.discard(ns)
            if ns in self.namespaces:
                return
            watchers = self._watchers.pop(ns, [])
        for watcher in watchers:
            watcher.stop()
        self.informers.drop(ns)
        if watchers:
            log.info("namespace %s no longer matches %s: not served", ns, self.namespace_selector)

    def _tenant(self, obj: dict[str, Any], present: bool = True) -> None:
        ns = obj["metadata"]["name"]
        if present and (obj.get("status") or {}).get("phase") != "Terminating":
            with self._lock:
                new = ns not in self._tenants
                self._tenants.add(ns)
            if new:
                log.info("namespace %s matches %s: served", ns, self.namespace_selector)
                # Tenants may not be bound yet (RBAC per namespace): their lists retry, but not every second.
                self._serve(ns, retry_seconds=10.0)
        else:
            self._unserve(ns)

    def _follow_tenants(self, watcher: Watcher) -> None:
        # A label-selector watch reports a namespace that stops matching as DELETED.
        self._follow(watcher, lambda event: self._tenant(event.object, present=event.type != "DELETED"))

    def _list_tenants(self) -> None:
        """Match the served tenants to a fresh list (what a broken watch may have missed)."""
        try:
            listed = self.kube.items(NAMESPACES, None, selector=self.namespace_selector)
        except KubeError as exc:
            log.warning("list namespaces %s: %s", self.namespace_selector, exc)
            return
        names = set()
        for obj in listed:
            self._tenant(obj)
            names.add(obj["metadata"]["name"])
        with self._lock:
            gone = self._tenants - names
        for ns in gone:
            self._unserve(ns)

    def _start_watches(self) -> None:
        self._with_kueue = served(self.kube)
        for ns in self.namespaces:
            self._serve(ns)
        if self.namespace_selector:
            watcher = Watcher(self.kube, NAMESPACES, None, selector=self.namespace_selector, retry_seconds=5.0)
            with self._lock:
                self._watchers.setdefault("", []).append(watcher)  # "": the namespaces watch itself
            self._spawn("watch-namespaces", self._follow_tenants, watcher)

    def _spawn(self, name: str, target: Any, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _enqueue_all(self) -> None:
        for ns in self.served():
            try:
                runs = self.kube.items(RUNS, ns)
            except Exception as exc:
                log.warning("resync %s: %s", ns, exc)
                continue
            for run in map(observe_run, runs):
                key = (ns, run.name)
                self._owners[key] = run.controller
                self.queue.add(key)

    def _resync(self) -> None:
        while not self._stop.wait(self.resync_seconds):
            if self.namespace_selector:
                self._list_tenants()
            self._enqueue_all()

    # ---- ownership --------------------------------------------------------------------------
    def _mine(self, key: Key) -> bool:
        """Whether this instance reconciles the run: it claimed it, or claims it now (unclaimed runs)."""
        if not self.instance:
            return True
        owner = self._owners.get(key)
        if owner == self.instance:
            return True
        if owner:
            return False
        ns, name = key
        try:
            run = self.kube.get(RUNS, ns, name)
        except NotFound:
            return True  # the reconciler forgets it
        owner = observe_run(run).controller
        if not owner:
            claim = {"metadata": {"resourceVersion": run["metadata"]["resourceVersion"]},
                     "status": {"controller": self.instance}}  # fmt: skip
            try:
                self.kube.patch(RUNS, ns, name, claim, subresource="status")
            except Conflict:  # written since we read it (perhaps claimed by another instance): look again
                self.queue.add(key, after=0.5)
                return False
            owner = self.instance
            log.info("run %s/%s: accepted by instance %s", ns, name, owner)
        self._owners[key] = owner
        if owner != self.instance:
            log.info("run %s/%s belongs to instance %s: ignored", ns, name, owner)
        return owner == self.instance

    # ---- the worker -----------------------------------------------------------------------
    def _new_term(self) -> None:
        """A leadership term begins: nothing remembered from before (another replica may have written since)."""
        self.generations.shutdown()
        self.reconciler.shutdown()  # its pools' queued work belongs to the old term (a fenced client refuses it)
        self.generations = GenerationPool(self.model_workers, notify=self.queue.add)
        self.reconciler = Reconciler(self.kube, self.options, self.generations, self.informers)
        self._enqueue_all()

    def run(self) -> None:
        """Watch and reconcile until `stop()` (blocking)."""
        log.info("controller watching namespaces: %s%s", ", ".join(self.namespaces),
                 f" and those labelled {self.namespace_selector}" if self.namespace_selector else "")  # fmt: skip
        self._start_watches()
        self._spawn("resync", self._resync)
        election = None
        if self.elector is not None:
            election = threading.Thread(target=self.elector.run, name="leader-election", daemon=True)
            election.start()
        self.healthy.set()
        failures: dict[Key, int] = {}
        term = 0
        while not self._stop.is_set():
            self._beat = time.monotonic()
            if self.elector is not None:
                if not self.elector.leading():
                    self.queue.get(timeout=0.5)  # a standby drains what its watches report
                    continue
                if self.elector.terms != term:
                    term = self.elector.terms
                    self.elector.serving = term  # writes of an earlier term's pass are refused from now on
                    self._new_term()
                    failures.clear()
            key = self.queue.get(timeout=0.5)
            if key is None:
                continue
            if key[0] not in self.served():
                continue
            started = time.monotonic()
            try:
                if not self._mine(key):
                    continue
                with reconciling(*key):
                    again = self.reconciler.reconcile(*key)
                failures.pop(key, None)
                self.metrics.reconciled(time.monotonic() - started, ok=True)
            except Fenced as exc:  # the lease lapsed mid-pass: the next term starts from scratch
                log.warning("reconcile %s/%s stopped: %s", *key, exc)
                continue
            except Exception:
                self.metrics.reconciled(time.monotonic() - started, ok=False)
                n = failures[key] = failures.get(key, 0) + 1
                again = min(30.0, 0.5 * 2**n)
                with reconciling(*key):
                    log.exception("reconcile %s/%s failed (attempt %d); retrying in %.1fs", *key, n, again)
            if again is not None:
                self.queue.add(key, after=again)
        self.generations.shutdown()
        self.reconciler.shutdown()
        if self.elector is not None and election is not None:
            election.join(timeout=30)  # its last renewal done, so the release is the Lease's last write of ours
            self.elector.release()  # the worker has stopped: nothing of ours writes any more
        log.info("controller stopped")

    def stop(self) -> None:
        self._stop.set()
        self.queue.close()
        if self.elector is not None:
            self.elector.stop()
        with self._lock:
            watchers = [w for ws in self._watchers.values() for w in ws]
        for watcher in watchers:
            watcher.stop()
