"""A simulated Kubernetes cluster for tests and benchmarks (no control plane can run on this machine).

`SimCluster` = `ApiServer` (the real HTTP API shape on 127.0.0.1, backed by `Store`) + `JobController`
+ `Kubelet` (pods as local Docker containers via `DockerRunner`, or instant `FakeRunner` pods).
"""

from wpbench_controller.sim.apiserver import ApiServer
from wpbench_controller.sim.cluster import SimCluster
from wpbench_controller.sim.node import DockerRunner, FakeRunner, JobController, Kubelet
from wpbench_controller.sim.store import ApiError, Store

__all__ = ["ApiError", "ApiServer", "DockerRunner", "FakeRunner", "JobController", "Kubelet", "SimCluster", "Store"]
