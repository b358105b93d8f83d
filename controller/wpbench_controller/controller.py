"""The controller process: watches feed a work queue of runs; one worker reconciles them.

Watches (runs and grader Jobs, per namespace) only say *which* run to look at; the reconciler
always reads the current state itself (level-triggered). A periodic resync enqueues every run, so
a missed event costs at most `resync_seconds`.
"""

from __future__ import annotations

import heapq
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from kubernetes import client as k8s
from kubernetes import watch as _watch

from wpbench_controller import crd
from wpbench_controller.reconciler import Options, Reconciler
from wpbench_k8s.executor.kubernetes import LABEL_RUN, MANAGED_BY, Kube, read_json

log = logging.getLogger(__name__)
Watch: Any = _watch.Watch  # untyped in the client
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
        api: k8s.ApiClient,
        namespaces: Iterable[str],
        *,
        options: Options | None = None,
        resync_seconds: float = 30.0,
        watch_timeout: int = 300,
    ) -> None:
        self.api = api
        self.namespaces = list(namespaces)
        self.reconciler = Reconciler(api, options)
        self.queue = WorkQueue()
        self.resync_seconds = resync_seconds
        self.watch_timeout = watch_timeout
        self._stop = threading.Event()
        self._watches: list[Any] = []
        self._threads: list[threading.Thread] = []
        self.healthy = threading.Event()

    # ---- watches --------------------------------------------------------------------------
    def _watch(
        self, name: str, lister: Callable[..., Any], on_event: Callable[[dict[str, Any]], None], **kw: Any
    ) -> None:
        """List, then watch from the list's resourceVersion; re-list on 410 Gone or any error."""
        while not self._stop.is_set():
            try:
                listed = read_json(lister(_preload_content=False, **kw))
                for obj in listed.get("items", []):
                    on_event(obj)
                version = listed["metadata"].get("resourceVersion")
                while not self._stop.is_set():
                    w = Watch()
                    self._watches.append(w)
                    try:
                        for event in w.stream(
                            lister,
                            resource_version=version,
                            timeout_seconds=self.watch_timeout,
                            deserialize=False,
                            **kw,
                        ):
                            if event["type"] == "BOOKMARK":
                                version = event["object"]["metadata"]["resourceVersion"]
                                continue
                            obj = event["object"]
                            version = obj["metadata"].get("resourceVersion", version)
                            on_event(obj)
                            if self._stop.is_set():
                                break
                    finally:
                        self._watches.remove(w)
            except k8s.ApiException as exc:
                if exc.status != 410:
                    log.warning("watch %s: %s %s; re-listing", name, exc.status, exc.reason)
                    self._stop.wait(1.0)
            except Exception as exc:  # connection refused/reset while the API server restarts
                if self._stop.is_set():
                    return
                log.warning("watch %s: %s; re-listing", name, exc)
                self._stop.wait(1.0)

    def _start_watches(self) -> None:
        kube = Kube(self.api)
        custom, batch = kube.custom, kube.batch
        selector = f"app.kubernetes.io/managed-by={MANAGED_BY},app.kubernetes.io/component=grader"
        for ns in self.namespaces:

            def on_run(obj: dict[str, Any], ns: str = ns) -> None:
                self.queue.add((ns, obj["metadata"]["name"]))

            def on_job(obj: dict[str, Any], ns: str = ns) -> None:
                run = (obj["metadata"].get("labels") or {}).get(LABEL_RUN)
                if run:
                    self.queue.add((ns, run))

            def list_runs(ns: str = ns, **kw: Any) -> Any:
                return custom.list_namespaced_custom_object(crd.GROUP, crd.VERSION, ns, crd.PLURAL, **kw)

            self._spawn(f"watch-runs-{ns}", self._watch, f"runs/{ns}", list_runs, on_run)
            self._spawn(
                f"watch-jobs-{ns}",
                self._watch,
                f"jobs/{ns}",
                batch.list_namespaced_job,
                on_job,
                namespace=ns,
                label_selector=selector,
            )

    def _spawn(self, name: str, target: Callable[..., None], *args: Any, **kwargs: Any) -> None:
        thread = threading.Thread(target=target, args=args, kwargs=kwargs, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _resync(self) -> None:
        custom = Kube(self.api).custom
        while not self._stop.wait(self.resync_seconds):
            for ns in self.namespaces:
                try:
                    listed = custom.list_namespaced_custom_object(crd.GROUP, crd.VERSION, ns, crd.PLURAL)
                except Exception as exc:
                    log.warning("resync %s: %s", ns, exc)
                    continue
                for run in listed.get("items", []):
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
            key = self.queue.get(timeout=0.5)
            if key is None:
                continue
            try:
                again = self.reconciler.reconcile(*key)
                failures.pop(key, None)
            except Exception:
                n = failures[key] = failures.get(key, 0) + 1
                again = min(30.0, 0.5 * 2**n)
                log.exception("reconcile %s/%s failed (attempt %d); retrying in %.1fs", *key, n, again)
            if again is not None:
                self.queue.add(key, after=again)
        log.info("controller stopped")

    def stop(self) -> None:
        self._stop.set()
        self.queue.close()
        for w in list(self._watches):
            w.stop()
