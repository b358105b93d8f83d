"""The simulation's Docker runner turns the grader pod spec into `docker run` flags. (The real kubelet
honouring that spec, and the reference check through the cluster path, are in test_cluster_path.py.)"""

from __future__ import annotations

from simkit import NAMESPACE

from wpbench_controller.sim import DockerRunner
from wpbench_controller.sim.node import Mounts
from wpbench_k8s.config import load_config
from wpbench_k8s.kube.client import to_dict
from wpbench_k8s.kube.objects import RunSettings, TaskSource, item_job
from wpbench_k8s.pipeline import plan_run


def grader_pod(mini_suite, image: str) -> dict:
    manifest = plan_run(load_config(None, {"dataset.path": str(mini_suite), "grader.image": image}), "reference")
    settings = RunSettings(name="probe", namespace=NAMESPACE)
    job = to_dict(item_job(manifest, manifest.items[0], settings, TaskSource("probe-payload", "task.json"), None))
    return job


def test_docker_flags_follow_the_pod_spec(mini_suite):
    job = grader_pod(mini_suite, "img")
    pod = {"metadata": {"name": "p", "namespace": NAMESPACE}, "spec": job["spec"]["template"]["spec"]}
    args = DockerRunner().docker_args(pod, Mounts(tmpfs={"/run/wpbench": "size=1"}), network_none=True, fault=None)
    joined = " ".join(args)
    for flag in ("--user 65532:65532", "--read-only", "--cap-drop ALL", "--security-opt no-new-privileges",
                 "--cpus 1", "--memory 536870912 --memory-swap 536870912", "--pids-limit 64", "--network none"):  # fmt: skip
        assert flag in joined, flag
    assert args[-2:] == ["img", "/etc/wpbench/task/task.json"]
