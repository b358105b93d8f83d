"""Grader Jobs and pods of each served namespace, kept in memory from the controller's watches.

A `Store` is fed by one `kube.client.Watcher`: every (re)list replaces it (`replace`, the watcher's `on_list`;
a 410 Gone or a broken watch relists), every event then updates it (`apply`). Until its first list a store
is not synced, and the reconciler LISTs as before. So a pass reads the run's Jobs and pods from memory
instead of two LISTs per pass.

What the reconciler writes itself goes in at once, so its next pass sees its own writes even when the
watch lags behind: a Job it created (`assume`, only when the watch has not brought it already: the watch's
copy is never replaced by the body sent) and a Job it deleted (`forget`; a late event about that object,
known by its uid, no longer brings it back, while a new Job of the same name is a new uid). The in-flight
bound counts on the first, a requeue on the second (the items of Jobs it deleted are graded again).

Pods come from here only for counting and messages (which pod starts, why it waits). A pass that decides a
finished attempt reads its pods live (`reconciler.Reconciler._pass`): a pod's last status may reach the
pods watch after its Job's end reached the Jobs watch, and a verdict is never read from a stale pod.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from wpbench_k8s.kube.client import WatchEvent


def _name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    return str(meta.get("name", "")) if isinstance(meta, Mapping) else ""


def _uid(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    return str(meta.get("uid", "")) if isinstance(meta, Mapping) else ""


def _labels(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return labels if isinstance(labels, Mapping) else {}


class Store:
    """The objects one watch reports (by name), safe to read from the worker while the watch thread writes.

    An object this process created is held for `assume_seconds` at most before the watch brings it: a watch
    that lost it (created and deleted between two relists) never leaves a Job that exists nowhere else.
    """

    def __init__(self, *, assume_seconds: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._objects: dict[str, dict[str, Any]] = {}
        self._assumed: dict[str, float] = {}  # name -> when this process created it (the watch has not said so)
        self._gone: set[str] = set()  # uids of objects this process deleted, until the API server says so too
        self.assume_seconds = assume_seconds
        self.clock = clock
        self.synced = False  # a first list arrived

    def replace(self, objects: list[dict[str, Any]]) -> None:
        """A (re)list: what the API server holds now, and nothing else."""
        with self._lock:
            self._gone &= {_uid(obj) for obj in objects}  # the others are gone for good
            self._objects = {_name(obj): obj for obj in objects if _uid(obj) not in self._gone}
            self._assumed.clear()
            self.synced = True

    def apply(self, event: WatchEvent) -> None:
        if event.type == "LISTED":  # `replace` has them already
            return
        name, uid = _name(event.object), _uid(event.object)
        with self._lock:
            if event.type == "DELETED":
                self._gone.discard(uid)
                if _uid(self._objects.get(name, {})) == uid:  # not a newer object of the same name
                    self._objects.pop(name, None)
            elif uid not in self._gone:
                self._objects[name] = event.object
                self._assumed.pop(name, None)

    def assume(self, obj: dict[str, Any]) -> None:
        """An object this process created: held until the watch brings the API server's copy."""
        name = _name(obj)
        with self._lock:
            if name not in self._objects:
                self._objects[name] = obj
                self._assumed[name] = self.clock()

    def forget(self, name: str) -> None:
        """An object this process deleted."""
        with self._lock:
            gone = self._objects.pop(name, None)
            self._assumed.pop(name, None)
            if gone is not None and _uid(gone):
                self._gone.add(_uid(gone))

    def select(self, labels: Mapping[str, str]) -> list[dict[str, Any]]:
        """The objects carrying every one of `labels`."""
        with self._lock:
            now = self.clock()
            for name in [n for n, since in self._assumed.items() if now - since > self.assume_seconds]:
                del self._assumed[name], self._objects[name]
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
