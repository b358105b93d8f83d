"""What a platform team watches, on the real cluster (issue 29): the controller's /metrics, scraped through
the API server's service proxy, follow a real run; `--log-format json` logs parse line by line; the grader
image is resolved once to the id the node reports, every grader pod runs that id and every record names it.
"""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
from kubernetes import watch
from prometheus_client.parser import text_string_to_metric_families

clusterkit = pytest.importorskip("clusterkit", reason="the real-cluster kit (tests/k8s/clusterkit.py) is not here yet")
Space, records = clusterkit.Space, clusterkit.records
pytestmark = pytest.mark.k8s


def scrape(space: Space) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """/metrics of the release's controller, through the API server's proxy to its metrics Service."""
    service = f"{space.release}-wpbench-k8s-metrics:http-metrics"
    res = space.cluster.kubectl(
        "get", "--raw", f"/api/v1/namespaces/{space.namespace}/services/{service}/proxy/metrics"
    )
    samples = {}
    for family in text_string_to_metric_families(res.stdout):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def value(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def total(samples: dict, name: str, **labels: str) -> float:
    """The sum over every label set that includes `labels`."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= set(ls))


class GraderImages:
    """The image every grader pod of the namespace was created with (pods are deleted with their Jobs)."""

    def __init__(self, space: Space) -> None:
        self.images: dict[str, str] = {}
        self.reported: dict[str, str] = {}
        self._w = watch.Watch()
        core = space.cluster.core
        version = core.list_namespaced_pod(space.namespace).metadata.resource_version
        threading.Thread(target=self._run, args=(core, space.namespace, version), daemon=True).start()

    def _run(self, core: Any, namespace: str, version: str) -> None:
        try:
            for ev in self._w.stream(core.list_namespaced_pod, namespace, resource_version=version,
                                     label_selector="app.kubernetes.io/component=grader", timeout_seconds=900):  # fmt: skip
                pod = ev["object"]
                self.images[pod.metadata.name] = pod.spec.containers[0].image
                for cs in pod.status.container_statuses or []:
                    if cs.image_id:
                        self.reported[pod.metadata.name] = cs.image_id
        except Exception:  # stop() closes the stream under it; the assertions count what was seen
            return

    def stop(self) -> None:
        self._w.stop()


def test_metrics_json_logs_and_the_pinned_grader_image_follow_a_real_run(
    space: Space, mini_suite: Path, tmp_path: Path
) -> None:
    items = 3
    suite = clusterkit.clone_suite(mini_suite, tmp_path / "suite", items)
    space.install_controller("controller.logFormat=json")
    before = scrape(space)
    assert total(before, "wpbench_runs") == 0 and value(before, "wpbench_grader_jobs", namespace=space.namespace,
                                                          state="active") == 0  # fmt: skip
    images = GraderImages(space)
    try:
        name = space.cli("submit", "--check-reference-solution", "--image", clusterkit.GRADER_IMAGE, "--dataset-path",
                         str(suite), "--no-cache", "--max-in-flight", str(items)).stdout.strip()  # fmt: skip
        run = space.wait_phase(name, 900)
    finally:
        images.stop()
    status = run["status"]
    assert (status["phase"], status["passed"]) == ("Succeeded", items), status

    # the image: resolved once to the id the node's containerd reports for the tag (no registry here: the
    # image was imported, so the kubelet reports its image id, which is Docker's id of the same image)
    docker_id = subprocess.run(["docker", "image", "inspect", "-f", "{{.Id}}", clusterkit.GRADER_IMAGE],
                               capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    assert status["graderImageID"] == docker_id, status
    assert len(images.images) == items, images.images  # the probe is a bare pod, not a grader Job's
    assert set(images.images.values()) == {docker_id}  # every grader pod ran the id, not the mutable tag
    assert set(images.reported.values()) == {docker_id}
    space.cli("results", name, "-o", str(tmp_path / "r.jsonl"))
    got = records(tmp_path / "r.jsonl")
    assert len(got) == items and {r["grader_image_id"] for r in got} == {docker_id}

    # the metrics followed it: one run Succeeded, its items passed, each grader Job timed once, none in flight
    after = space.wait_for(
        lambda: (m := scrape(space)) and value(m, "wpbench_runs", namespace=space.namespace, phase="Succeeded") == 1
        and m, 60, "the metrics to show the run Succeeded")  # fmt: skip
    ns = space.namespace
    assert value(after, "wpbench_runs", namespace=ns, phase="Running") == 0
    assert value(after, "wpbench_items", namespace=ns, status="passed") == items
    assert value(after, "wpbench_items", namespace=ns, status="pending") == 0
    assert value(after, "wpbench_grading_duration_seconds_count", namespace=ns, outcome="Complete") == items
    assert value(after, "wpbench_grading_duration_seconds_sum", namespace=ns, outcome="Complete") > 0
    assert value(after, "wpbench_grader_jobs", namespace=ns, state="active") == 0
    assert value(after, "wpbench_infra_retries_total", namespace=ns) == 0
    assert value(after, "wpbench_api_requests_total", verb="create", resource="jobs", code="201") == items
    assert total(after, "wpbench_api_requests_total", verb="patch", resource="wpbenchruns/status") >= 2
    assert total(after, "wpbench_reconcile_passes_total", result="ok") > total(before, "wpbench_reconcile_passes_total")
    assert total(after, "wpbench_api_throttled_total") == 0  # nothing throttled this controller

    # JSON logs: every line the controller wrote is one object; the run's lines name it
    res = space.cluster.kubectl("logs", "-n", ns, f"deployment/{space.release}-wpbench-k8s-controller")
    lines = [line for line in res.stdout.splitlines() if line.strip()]
    docs = [json.loads(line) for line in lines]
    assert docs and all({"time", "level", "logger", "message"} <= d.keys() for d in docs)
    assert any(d.get("run") == name and d.get("namespace") == ns for d in docs), lines[-20:]
