"""A whole simulated cluster: API server + Job controller + one kubelet, driven by store events.

with SimCluster(runner=FakeRunner()) as cluster:
    kubeconfig = cluster.kubeconfig(tmp_path / "kubeconfig")
    cluster.namespace("wpbench")          # Pod Security restricted, like the chart's
    cluster.install_crd()                 # the WPBenchRun CRD
    ...                                   # any client (the real CLI, the real controller) talks to cluster.url
"""

from __future__ import annotations

import threading
from pathlib import Path
from types import TracebackType
from typing import Any

from wpbench_controller.sim.apiserver import ApiServer
from wpbench_controller.sim.node import FakeRunner, JobController, Kubelet, Runner
from wpbench_controller.sim.store import Resource, Store


class SimCluster:
    def __init__(self, runner: Runner | None = None, *, cpu_capacity: float = 2.0, tick: float = 0.1) -> None:
        self.store = Store()
        self.server = ApiServer(self.store)
        self.jobs = JobController(self.store)
        self.kubelet = Kubelet(self.store, runner or FakeRunner(), cpu_capacity=cpu_capacity)
        self.tick = tick
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.store.listeners.append(self._on_change)

    @property
    def url(self) -> str:
        return self.server.url

    def _on_change(self, res: Resource, kind: str, obj: dict[str, Any]) -> None:
        if res.plural in ("jobs", "pods"):
            self._wake.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.tick)
            self._wake.clear()
            self.jobs.sync_all()
            self.kubelet.sync()

    def start(self) -> SimCluster:
        self.server.start()
        self._thread = threading.Thread(target=self._loop, name="sim-node", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for handle in list(self.kubelet.running.values()):
            if handle is not None:
                handle.kill()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.server.stop()

    def __enter__(self) -> SimCluster:
        return self.start()

    def __exit__(self, *exc: tuple[type[BaseException] | None, BaseException | None, TracebackType | None]) -> None:
        self.stop()

    # ---- conveniences for tests -------------------------------------------------------------
    def kubeconfig(self, path: Path, namespace: str = "default") -> Path:
        return self.server.write_kubeconfig(path, namespace)

    def namespace(self, name: str, *, restricted: bool = True) -> None:
        from wpbench_k8s.kube.client import to_dict
        from wpbench_k8s.kube.objects import namespace_object

        obj = to_dict(namespace_object(name))
        if not restricted:
            obj["metadata"]["labels"] = {}
        self.store.create(self.store.resources["/namespaces"], "", obj)

    def install_crd(self) -> None:
        from wpbench_k8s.kube.crd import crd

        self.store.create(self.store.resources["apiextensions.k8s.io/customresourcedefinitions"], "", crd())

    def objects(self, plural: str, namespace: str | None = None, group: str = "") -> list[dict[str, Any]]:
        res = next(r for r in self.store.resources.values() if r.plural == plural and (not group or r.group == group))
        items, _ = self.store.list_objects(res, namespace)
        return items
