"""Grader Jobs and pods of each served namespace, kept in memory from the controller's watches.

A `Store` is fed by one `kube.client.Watcher`: every (re)list replaces it (`replace`, the watcher's `on_list`;
a 410 Gone or a broken watch relists), every event then updates it (`apply`). Until its first list a store
is not synced, and the reconciler LISTs as before. So a pass reads the run's Jobs and pods from memory
instead of two LISTs per pass.

What the reconciler writes itself goes in at once, so its next pass sees its own writes even when the
watch lags behind: a Job it created (`assume`, only when the watch has not brought it already: the watch's
copy is never replaced by the body sent) and a Job it deleted (`forget`). The in-flight bound counts on it.

Pods come from here only for counting and messages (which pod starts, why it waits). A pass that decides a
finished attempt reads its pods live (`reconciler.Reconciler._pass`): a pod's last status may reach the
pods watch after its Job's end reached the Jobs watch, and a verdict is never read from a stale pod.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from wpbench_k8s.kube.client import WatchEvent


def _name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    return str(meta.get("name", "")) if isinstance(meta, Mapping) else ""


def _labels(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return labels if isinstance(labels, Mapping) else {}


class Store:
    """The objects one watch reports (by name), safe to read from the worker while the watch thread writes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._objects: dict[str, dict[str, Any]] = {}
        self.synced = False  # a first list arrived

    def replace(self, objects: list[dict[str, Any]]) -> None:
        """A (re)list: what the API server holds now, and nothing else."""
        fresh = {_name(obj): obj for obj in objects}
        with self._lock:
            self._objects = fresh
            self.synced = True

    def apply(self, event: WatchEvent) -> None:
        name = _name(event.object)
        if event.type == "LISTED":  # `replace` has them already
            return
        with self._lock:
            if event.type == "DELETED":
                self._objects.pop(name, None)
            else:
                self._objects[name] = event.object

    def assume(self, obj: dict[str, Any]) -> None:
        """An object this process created: held until the watch brings the API server's copy."""
        with self._lock:
            self._objects.setdefault(_name(obj), obj)

    def forget(self, name: str) -> None:
        """An object this process deleted."""
        with self._lock:
            self._objects.pop(name, None)

    def select(self, labels: Mapping[str, str]) -> list[dict[str, Any]]:
        """The objects carrying every one of `labels`."""
        with self._lock:
            objects = list(self._objects.values())
        return [obj for obj in objects if all(_labels(obj).get(k) == v for k, v in labels.items())]


class Informers:
    """A Jobs store and a pods store per served namespace (grader objects of this project only)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stores: dict[str, tuple[Store, Store]] = {}

    def serve(self, namespace: str) -> tuple[Store, Store]:
        """The (jobs, pods) stores of `namespace`, made when first asked for (its watches feed them)."""
        with self._lock:
            return self._stores.setdefault(namespace, (Store(), Store()))

    def drop(self, namespace: str) -> None:
        """The namespace is no longer served: its watches stopped, so its stores are no longer true."""
        with self._lock:
            self._stores.pop(namespace, None)

    def synced(self, namespace: str) -> tuple[Store, Store] | None:
        """The namespace's stores once both have listed (None: read the API server)."""
        with self._lock:
            stores = self._stores.get(namespace)
        if stores is None or not (stores[0].synced and stores[1].synced):
            return None
        return stores
