"""The controller's metrics follow what its watches report, `/metrics` serves them in Prometheus' text
format, `--log-format json` writes one JSON object per line, and grader pods run the resolved image id.
(The same on the real cluster, with a real run: tests/k8s/test_observability_cluster.py.)"""

from __future__ import annotations

import io
import json
import logging
import urllib.request

import pytest
from kubernetes import client as k8s
from prometheus_client.parser import text_string_to_metric_families

from wpbench_controller.controller import Controller
from wpbench_controller.logs import JsonFormatter, reconciling
from wpbench_controller.main import _serve_health, parse_args
from wpbench_controller.metrics import Metrics
from wpbench_k8s.kube.client import Kube, WatchEvent
from wpbench_k8s.kube.objects import pinned_image
from wpbench_k8s.manifest import GraderSpec

ID = "sha256:" + "ab" * 32


def job(uid: str, attempt: int = 1, *, suspend: bool = False, ended: str = "", start: str = "") -> dict:
    status: dict = {}
    if start:
        status["startTime"] = start
    if ended:
        status["conditions"] = [{"type": ended, "status": "True", "lastTransitionTime": "2026-01-01T00:00:42Z"}]
    return {
        "metadata": {"name": f"j-{uid}", "uid": uid, "labels": {"wpbench-k8s.org/attempt": str(attempt)}},
        "spec": {"suspend": suspend},
        "status": status,
    }


def value(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_grader_jobs_retries_and_durations_follow_the_job_watch():
    m = Metrics()
    m.jobs_listed("ns", [job("a"), job("b", suspend=True)])
    assert value(m, "wpbench_grader_jobs", namespace="ns", state="active") == 1
    assert value(m, "wpbench_grader_jobs", namespace="ns", state="queued") == 1
    m.job_event("ns", WatchEvent("ADDED", job("c", attempt=2)))  # a retry's Job
    assert value(m, "wpbench_infra_retries_total", namespace="ns") == 1
    done = job("a", start="2026-01-01T00:00:00Z", ended="Complete")
    for _ in range(2):  # the same end seen twice is timed once
        m.job_event("ns", WatchEvent("MODIFIED", done))
    assert value(m, "wpbench_grading_duration_seconds_count", namespace="ns", outcome="Complete") == 1
    assert value(m, "wpbench_grading_duration_seconds_sum", namespace="ns", outcome="Complete") == 42
    assert value(m, "wpbench_grader_jobs", namespace="ns", state="active") == 1  # c; a ended
    m.job_event("ns", WatchEvent("DELETED", job("c", attempt=2)))
    m.jobs_listed("ns", [])  # a relist replaces what was known: b went while the watch was away
    assert value(m, "wpbench_grader_jobs", namespace="ns", state="queued") == 0
    assert value(m, "wpbench_grader_jobs", namespace="ns", state="active") == 0
    # a Job already finished when listed (before this process started) is not timed again
    m.jobs_listed("ns", [job("old", start="2026-01-01T00:00:00Z", ended="Failed")])
    assert value(m, "wpbench_grading_duration_seconds_count", namespace="ns", outcome="Failed") is None


def test_runs_by_phase_and_items_by_status_follow_the_run_watch():
    m = Metrics()
    running = {"metadata": {"name": "r1"}, "status": {"phase": "Running", "total": 10, "done": 4, "passed": 3,
                                                     "failed": 1}}  # fmt: skip
    m.runs_listed("ns", [running, {"metadata": {"name": "new"}}])
    assert value(m, "wpbench_runs", namespace="ns", phase="Running") == 1
    assert value(m, "wpbench_runs", namespace="ns", phase="Pending") == 1  # no status yet
    assert value(m, "wpbench_runs", namespace="ns", phase="Succeeded") == 0
    assert value(m, "wpbench_items", namespace="ns", status="pending") == 6
    finished = {"metadata": {"name": "r1"}, "status": {"phase": "Succeeded", "total": 10, "done": 10, "passed": 8,
                                                      "failed": 1, "infraErrors": 1}}  # fmt: skip
    m.run_event("ns", WatchEvent("MODIFIED", finished))
    assert value(m, "wpbench_runs", namespace="ns", phase="Succeeded") == 1
    assert value(m, "wpbench_runs", namespace="ns", phase="Running") == 0
    assert value(m, "wpbench_items", namespace="ns", status="infra_error") == 1
    assert value(m, "wpbench_items", namespace="ns", status="pending") == 0
    m.run_event("ns", WatchEvent("DELETED", finished))
    assert value(m, "wpbench_runs", namespace="ns", phase="Succeeded") == 0
    assert value(m, "wpbench_items", namespace="ns", status="passed") == 0


def test_metrics_are_served_in_prometheus_text_format():
    cfg = k8s.Configuration()
    cfg.host = "http://127.0.0.1:9"  # never asked: no run is reconciled here
    controller = Controller(Kube(k8s.ApiClient(cfg)), ["ns"])
    controller.metrics.request("get", "pods", 200)
    controller.metrics.reconciled(0.02, ok=True)
    server = _serve_health(0, controller)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.server_port}/metrics", timeout=10) as response:
            assert response.headers["Content-Type"].startswith("text/plain")
            text = response.read().decode()
    finally:
        server.shutdown()
        controller.generations.shutdown()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    (requests,) = families["wpbench_api_requests"].samples[:1]
    assert requests.labels == {"verb": "get", "resource": "pods", "code": "200"} and requests.value == 1
    assert {s.labels.get("result") for s in families["wpbench_reconcile_passes"].samples} == {"ok"}


def test_json_logs_are_one_object_per_line_with_the_run_when_known():
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    log = logging.getLogger("wpbench_controller.test")
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        log.info("outside a run")
        with reconciling("team-a", "run-1"):
            log.warning("candidate said %s", 'line one\nline two\u2028{"level": "ERROR"}')
            try:
                raise ValueError("boom")
            except ValueError:
                log.exception("pass failed")
        log.info("named", extra={"namespace": "team-b", "run": "run-2"})
    finally:
        log.removeHandler(handler)
    lines = stream.getvalue().splitlines()
    docs = [json.loads(line) for line in lines]
    assert len(docs) == 4  # a newline or separator in a message cannot start a line of its own
    assert docs[0].keys() == {"time", "level", "logger", "message"}
    assert docs[0]["time"].endswith("Z") and docs[0]["logger"] == "wpbench_controller.test"
    assert (docs[1]["level"], docs[1]["namespace"], docs[1]["run"]) == ("WARNING", "team-a", "run-1")
    assert docs[1]["message"].startswith("candidate said line one\nline two")
    assert "ValueError: boom" in docs[2]["exception"] and docs[2]["run"] == "run-1"
    assert (docs[3]["namespace"], docs[3]["run"]) == ("team-b", "run-2")


def test_log_format_is_an_argument_with_a_closed_set_of_values(capsys):
    assert parse_args(["--log-format", "json"]).log_format == "json"
    assert parse_args([]).log_format == "text"
    with pytest.raises(SystemExit) as exit_:
        parse_args(["--log-format", "yaml"])
    assert exit_.value.code == 2


@pytest.mark.parametrize(
    ("image_id", "runs"),
    [
        ("", "wpbench-grader:dev"),  # not resolved: the tag
        (ID, ID),  # imported into the node's runtime: the id the node resolves locally
        (f"registry.example/wpbench-grader@{ID}", f"registry.example/wpbench-grader@{ID}"),  # pulled by digest
        (f"docker-pullable://registry.example/g@{ID}", f"registry.example/g@{ID}"),
        ("sha256:short", "wpbench-grader:dev"),  # not an id: never run as one
        ("evil:latest", "wpbench-grader:dev"),
        (f"evil:latest@{ID}x", "wpbench-grader:dev"),
    ],
)
def test_grader_pods_run_the_resolved_image_id(image_id: str, runs: str):
    assert pinned_image(GraderSpec(image="wpbench-grader:dev", image_id=image_id)) == runs
