"""Failure-path parity: the same hostile candidate ends the same way on the local Docker backend and on
the real local Kubernetes (one Job per attempt, read by `wpbench_k8s.kube.facts`, the reading the
controller's collector uses too). Each backend reduces what it saw to `GraderFacts`; the one rule in
`wpbench_k8s.outcome` decides. What may differ is only the backend's words (container vs pod name) and
durations; the decision, the verdict and the record's status may not.

Paths: hung (the supervisor's timeout, and the backend's outer deadline when there is no grace),
OOM-killed (the candidate fills the tmpfs mounts, which count against the container's memory, then
lifts memory_limit: the runner's data cap stops PHP at ~416 MiB, which no longer fits in 512 MiB),
no output (the candidate closes its own stdout and stderr and exits), and stopped from outside
(`docker kill`; the grader pod deleted).
"""

from __future__ import annotations

import re
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Any

import docker
import pytest
from clusterkit import Space

from wpbench_k8s.executor import get_executor
from wpbench_k8s.executor.base import Executor
from wpbench_k8s.executor.docker import RUN_LABEL
from wpbench_k8s.executor.kubernetes import KubernetesExecutor
from wpbench_k8s.kube.names import run_selector
from wpbench_k8s.kube.objects import DEFAULT_EGRESS_WAIT_SECONDS
from wpbench_k8s.manifest import GraderSpec
from wpbench_k8s.outcome import Decision, GraderFacts, Infra, decide_outcome, settle
from wpbench_runtime.contract import GradeTask

pytestmark = pytest.mark.docker

OOM = (
    "ini_set( 'memory_limit', '-1' ); $s = str_repeat( 't', 1 << 20 );"
    " foreach ( array( '/tmp', WP_CONTENT_DIR ) as $d ) { for ( $i = 0; @file_put_contents( \"$d/f$i\", $s ); $i++ ) {} }"
    " $a = array(); while ( true ) { $a[] = str_repeat( 'm', 1 << 20 ); }"
)


@dataclass(frozen=True)
class FailurePath:
    code: str
    timeout: float
    expect: tuple[str, str]  # the decision and the record's status once retries are spent
    grace: float = 30.0
    kill_after_running: float | None = None  # seconds the grader runs before it is killed from outside
    outer_first: bool = False  # the backend's outer deadline comes before the grader's own end


class OuterDeadlineFirst(GradeTask):
    """A task whose backend deadline leaves out its setup budget, as a grader slowed past its own bounds would
    see it: with no grace the backend stops the grader before the grader's timer ends the candidate."""

    @property
    def budget_seconds(self) -> float:
        return self.timeout_seconds


class OuterDeadlineFirstOnKubernetes(OuterDeadlineFirst):
    """The same on Kubernetes, whose pod deadline also holds the egress gate's bound (`kube.objects`), a bound the
    gate leaves unused once the pod's deny-all policy is up: left out too, so the pod's deadline is the same."""

    @property
    def budget_seconds(self) -> float:
        return self.timeout_seconds - DEFAULT_EGRESS_WAIT_SECONDS


PATHS = {
    "hung": FailurePath("sleep( 60 );", 2, ("Scored", "timeout")),
    "hung-past-the-outer-deadline": FailurePath("sleep( 60 );", 2, ("Infra", "timeout"), grace=0, outer_first=True),
    "oom-killed": FailurePath(OOM, 30, ("Infra", "error")),
    "no-output": FailurePath("fclose( STDOUT ); fclose( STDERR ); exit( 0 );", 10, ("Scored", "error")),
    "stopped-from-outside": FailurePath("sleep( 60 );", 60, ("Infra", "infra_error"), kill_after_running=3),
}


def _docker_kill(executor: Executor, space: Space, after: float) -> None:
    api = docker.APIClient()
    label = f"{RUN_LABEL}={executor.run_id}"
    space.wait_for(lambda: api.containers(filters={"label": label, "status": "running"}), 120, "a grader")
    time.sleep(after)  # WordPress has booted; the candidate sleeps
    # Every running container of the run: the grader and the spare the executor started beside it (which one
    # grades is the executor's business; killing only the first listed could leave the grader running).
    for container in api.containers(filters={"label": label, "status": "running"}):
        subprocess.run(["docker", "kill", container["Id"]], check=False, capture_output=True)


def _pod_delete(executor: Executor, space: Space, after: float) -> None:
    assert isinstance(executor, KubernetesExecutor)
    selector = run_selector(executor.run_name)

    def running() -> list[Any]:
        pods = space.cluster.core.list_namespaced_pod(space.namespace, label_selector=selector).items
        return [p for p in pods if p.status.phase == "Running"]

    pod = space.wait_for(running, 600, "a running grader pod")[0]
    time.sleep(after)
    space.cluster.core.delete_namespaced_pod(pod.metadata.name, space.namespace)


KILLS = {"docker": _docker_kill, "kubernetes": _pod_delete}


def _grade(backend: str, name: str, path: FailurePath, image: str, space: Space) -> GraderFacts:
    spec = GraderSpec(image=image, timeout_seconds=path.timeout, grace_seconds=path.grace)
    # A run id of its own per case: an executor's cleanup removes every container of its run id, so two cases
    # graded at once (two pytest workers) under one id would kill each other's graders (an engine kill event).
    executor = get_executor(backend, spec, f"parity-{backend}-{name}")
    executor.preflight()
    killer = None
    if path.kill_after_running is not None:
        killer = threading.Thread(target=KILLS[backend], args=(executor, space, path.kill_after_running), daemon=True)
        killer.start()
    try:
        kind = GradeTask
        if path.outer_first:
            kind = OuterDeadlineFirstOnKubernetes if backend == "kubernetes" else OuterDeadlineFirst
        facts = executor.run_grader(kind(test_id="parity", code=path.code, timeout_seconds=path.timeout))
    finally:
        executor.cleanup()
    if killer is not None:
        killer.join(60)
    return facts


def _outcome(decision: Decision) -> dict[str, Any]:
    """The decision without the backend's words (pod or container names) and durations."""
    final = settle(decision)
    verdict = final.model_dump(mode="json", exclude={"duration_ms", "stderr"}) if final else None
    if verdict:
        verdict["reason"] = re.sub(r" \((?:pod |job |the engine|not finished|connection)[^)]*\)", "", verdict["reason"])
        verdict["phases"] = {k: re.sub(r" \(\d+ ms\)", "", v) for k, v in verdict["phases"].items()}
    return {"decision": type(decision).__name__, "retried": isinstance(decision, Infra), "record": verdict}


@pytest.mark.parametrize("name", list(PATHS))
def test_a_failure_path_ends_the_same_on_both_backends(
    name: str, space: Space, grader_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(space.kubeconfig))
    monkeypatch.setenv("WPBENCH_K8S_NAMESPACE", space.namespace)
    path = PATHS[name]
    seen = {backend: _grade(backend, name, path, grader_image, space) for backend in ("docker", "kubernetes")}
    flags = {b: f.model_dump(include={"started", "stopped_from_outside", "oom_killed", "deadline_exceeded"})
             for b, f in seen.items()}  # fmt: skip
    why = {b: (f.infra_reason, f.detail) for b, f in seen.items()}  # what pytest's repr of `seen` cuts off
    assert flags["docker"] == flags["kubernetes"], why  # the same thing happened, in the backends' words
    outcomes = {backend: _outcome(decide_outcome(facts)) for backend, facts in seen.items()}
    assert outcomes["docker"] == outcomes["kubernetes"], seen
    docker_end = outcomes["docker"]
    assert (docker_end["decision"], (docker_end["record"] or {}).get("status", "infra_error")) == path.expect, seen
