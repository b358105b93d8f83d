"""A simulated Kubernetes cluster for what only a simulation can inject or count (the real cluster path is
tested on the local Kubernetes of `make cluster-up`).

`SimCluster` = `ApiServer` (the real HTTP API shape on 127.0.0.1, backed by `Store`) + `JobController`
+ `Kubelet` (instant `FakeRunner` pods, faults injected per test id).
"""

from wpbench_controller.sim.apiserver import ApiServer
from wpbench_controller.sim.cluster import SimCluster
from wpbench_controller.sim.node import FakeRunner, JobController, Kubelet
from wpbench_controller.sim.store import ApiError, Store

__all__ = ["ApiError", "ApiServer", "FakeRunner", "JobController", "Kubelet", "SimCluster", "Store"]
