"""A test's grader pod logs, or its stored verdict once the pods are gone."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from wpbench_k8s.cluster.connection import Cluster, ClusterError


@dataclass(frozen=True)
class LogSection:
    header: str  # what the text is (a pod and its phase, or a stored verdict); for stderr
    text: str


def log_selector(run_name: str, test_id: str, model: str | None) -> str:
    from wpbench_k8s.kube.names import LABEL_MODEL, LABEL_RUN, LABEL_TEST, label_value

    selector = f"{LABEL_RUN}={label_value(run_name)},{LABEL_TEST}={label_value(test_id)}"
    return selector + (f",{LABEL_MODEL}={label_value(model)}" if model else "")


def grader_logs(cluster: Cluster, run_name: str, test_id: str, model: str | None = None) -> Iterator[LogSection]:
    """Each grader pod's log, oldest first; without pods, each stored verdict of the test.

    Raises:
        ClusterError: no pod and no stored result (or no such run).
    """
    from wpbench_k8s.kube.client import PODS
    from wpbench_k8s.kube.facts import read_log
    from wpbench_k8s.kube.names import COMPONENT_GRADER, run_selector
    from wpbench_k8s.kube.results import read_records

    pods = cluster.kube.items(PODS, cluster.namespace, selector=log_selector(run_name, test_id, model))
    if not pods:  # fast mode: a pod grading a sequence is labelled with its first test (and model) only
        graders = cluster.kube.items(PODS, cluster.namespace, selector=run_selector(run_name, COMPONENT_GRADER))
        pods = [p for p in graders if test_id in _sequence_tests(p)]
    for pod in sorted(pods, key=lambda p: p["metadata"].get("creationTimestamp") or ""):
        name = pod["metadata"]["name"]
        data, error = read_log(cluster.kube, cluster.namespace, name, tries=1, tasks=max(1, len(_sequence_tests(pod))))
        text = data.decode("utf-8", "replace") if data is not None else f"(log not available: {error})\n"
        yield LogSection(f"==> pod {name} ({(pod.get('status') or {}).get('phase')}) <==", text)
    if pods:
        return
    run = cluster.run(run_name)  # a clear error when the run itself is missing
    stored = [r for r in read_records(cluster.kube, cluster.namespace, run)
              if r.test_id == test_id and (model is None or r.model == model)]  # fmt: skip
    if not stored:
        raise ClusterError(f"no pod and no stored result for test {test_id} in run {run_name}")
    for record in stored:
        grader = record.grader
        doc = grader.verdict.model_dump(mode="json") if grader.verdict else grader.model_dump(mode="json")
        yield LogSection(f"==> {record.item_id}: pod already collected; the stored verdict <==",
                         json.dumps(doc, indent=2) + "\n")  # fmt: skip


def _sequence_tests(pod: dict[str, Any]) -> list[str]:
    """The tests a fast-mode pod grades, in order ([] for a pod grading one test)."""
    from wpbench_k8s.kube.names import ANNOTATION_TEST_IDS, annotation_list

    return annotation_list((pod.get("metadata") or {}).get("annotations") or {}, ANNOTATION_TEST_IDS)
