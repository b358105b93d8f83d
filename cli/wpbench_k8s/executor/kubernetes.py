"""Kubernetes backend for `wpbench-k8s run --executor kubernetes`: one Job per grader attempt.

Everything Kubernetes lives in `wpbench_k8s.kube` (the controller builds the same Job and reads
the same facts): here only the local driving. Each `run_grader` stores the task in a ConfigMap,
creates a Job (backoffLimit 0: the pipeline's retry layer decides about another attempt), watches
it to the end, reads at most `MAX_GRADER_OUTPUT_BYTES` of the pod log, and deletes both. Grader
pods of the run sit behind a deny-all NetworkPolicy made at preflight.

Where to run comes from the environment: `KUBECONFIG`, `WPBENCH_K8S_CONTEXT`,
`WPBENCH_K8S_NAMESPACE` (default `wpbench`).
"""

from __future__ import annotations

import contextlib
import itertools
import os

from kubernetes import client as k8s

from wpbench_k8s.errors import ExecutorError
from wpbench_k8s.executor.base import Executor, register_executor
from wpbench_k8s.kube.client import (
    CONFIG_MAPS,
    JOBS,
    NAMESPACES,
    NETWORK_POLICIES,
    PODS,
    Kube,
    KubeError,
    api_client,
    to_dict,
    wait_for,
)
from wpbench_k8s.kube.facts import attempt_events, attempt_facts, job_finished, newest, read_log
from wpbench_k8s.kube.names import (
    ANNOTATION_TEST_ID,
    LABEL_ITEM,
    dns_label,
    grader_labels,
    job_name,
    run_selector,
)
from wpbench_k8s.kube.objects import (
    DEFAULT_EGRESS_WAIT_SECONDS,
    DEFAULT_START_SECONDS,
    RunSettings,
    TaskSource,
    attempt_deadline_seconds,
    build_grader_job,
    network_policy,
)
from wpbench_k8s.manifest import GraderSpec
from wpbench_k8s.outcome import GraderFacts
from wpbench_runtime.contract import GradeTask


@register_executor("kubernetes")
class KubernetesExecutor(Executor):
    """Grades each task in its own Job in a namespace of the cluster the kubeconfig points at."""

    def __init__(self, spec: GraderSpec, run_id: str) -> None:
        super().__init__(spec, run_id)
        self.namespace = os.environ.get("WPBENCH_K8S_NAMESPACE", "wpbench")
        self.kubeconfig = os.environ.get("KUBECONFIG") or None
        self.context = os.environ.get("WPBENCH_K8S_CONTEXT") or None
        self.start_seconds = DEFAULT_START_SECONDS
        self.egress_wait_seconds = DEFAULT_EGRESS_WAIT_SECONDS
        self._kube: Kube | None = None
        self._counter = itertools.count(1)
        self.run_name = dns_label("wpbench-local", run_id, max_len=40)

    @property
    def kube(self) -> Kube:
        if self._kube is None:
            self._kube = Kube(api_client(self.kubeconfig, self.context))
        return self._kube

    def preflight(self) -> GraderSpec:
        if self.spec.execution_isolation != "reset_per_test":
            raise ExecutorError(
                f"execution_isolation {self.spec.execution_isolation} (fast mode) runs on the Docker executor only; "
                "on Kubernetes every test gets its own pod (reset_per_test)"
            )
        try:
            self.kube.get(NAMESPACES, None, self.namespace)
            policy = network_policy(RunSettings(name=self.run_name, namespace=self.namespace), None)
            self.kube.ensure(NETWORK_POLICIES, self.namespace, to_dict(policy))
        except KubeError as exc:
            raise ExecutorError(f"Kubernetes namespace {self.namespace}: {exc}") from exc
        return self.spec

    def run_grader(self, task: GradeTask) -> GraderFacts:
        kube = self.kube
        item_id = f"{task.test_id}-{next(self._counter)}"
        name = job_name(self.run_name, item_id)
        labels = grader_labels(self.run_name, test_id=task.test_id, model="local", item_id=item_id)
        cm = k8s.V1ConfigMap(
            api_version="v1",
            kind="ConfigMap",
            metadata=k8s.V1ObjectMeta(name=name, namespace=self.namespace, labels=labels),
            data={"task.json": task.model_dump_json()},
        )
        job = build_grader_job(
            name=name,
            namespace=self.namespace,
            spec=self.spec,
            task_timeout=task.budget_seconds,
            task_source=TaskSource(name, "task.json"),
            labels=labels,
            annotations={ANNOTATION_TEST_ID: task.test_id},
            start_seconds=self.start_seconds,
            egress_wait_seconds=self.egress_wait_seconds,
        )
        # The Job's own deadline ends it; this only guards against a Job controller that is not running.
        deadline = attempt_deadline_seconds(self.spec, task.budget_seconds, self.egress_wait_seconds)
        patience = deadline + self.start_seconds + 60
        try:
            kube.create(CONFIG_MAPS, self.namespace, to_dict(cm))
            kube.create(JOBS, self.namespace, to_dict(job))
            event = wait_for(
                kube,
                JOBS,
                self.namespace,
                name,
                lambda e: e.type == "DELETED" or job_finished(e.object),
                timeout=patience,
            )
            if event is None or event.type == "DELETED":
                why = "deleted from outside" if event else f"not finished within {patience} s"
                return GraderFacts(test_id=task.test_id, started=False, infra_reason=f"job {name} {why}")
            pod = newest(kube.items(PODS, self.namespace, selector=f"{LABEL_ITEM}={labels[LABEL_ITEM]}"))
            log, log_error = (None, "")
            if pod is not None:
                log, log_error = read_log(kube, self.namespace, pod["metadata"]["name"])
            events = [] if pod else attempt_events(kube, self.namespace, name)
            return attempt_facts(event.object, pod, test_id=task.test_id, log=log, log_error=log_error, events=events)
        except KubeError as exc:
            return GraderFacts(test_id=task.test_id, started=False, infra_reason=f"Kubernetes API: {exc}")
        finally:
            self._delete(name)

    def _delete(self, name: str) -> None:
        for kind in (JOBS, CONFIG_MAPS):
            with contextlib.suppress(KubeError):  # cleanup() removes leftovers by label
                self.kube.delete(kind, self.namespace, name)

    def cleanup(self) -> int:
        removed = 0
        for kind in (JOBS, CONFIG_MAPS, NETWORK_POLICIES):
            for obj in self.kube.items(kind, self.namespace, selector=run_selector(self.run_name)):
                removed += self.kube.delete(kind, self.namespace, obj["metadata"]["name"])
        return removed
