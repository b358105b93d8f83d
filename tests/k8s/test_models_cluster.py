"""A model run on the real cluster: `submit` needs no key and calls no model; the in-cluster controller (the
chart's, keys from its API-key Secret) calls the fake OpenAI-compatible provider, and grader pods grade. On the
local cluster the provider listens on the pod bridge's gateway (an address of this machine the controller pod
can route to); on kind (CLUSTER=kind) pods reach nothing of this machine, so it listens on loopback for the
local run and also inside the control-plane node's network namespace, on the node's address, for the pods."""

from __future__ import annotations

import glob
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clusterkit import GATEWAY, REPO, Cluster, Space, kind_node_network, records
from modelkit import (
    BY_PROMPT,
    EXPECTED_TESTS,
    MINI,
    PROVIDER_VARS,
    RATE_LIMITED,
    SELECTION,
    Models,
    comparable,
    good_answer,
    model_env,
    summary_sections,
)

sys.path.insert(0, str(REPO / "tests" / "models"))
from fake_provider import FakeProvider, Reply, server_error, user_text

pytestmark = pytest.mark.docker


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch, kube: Cluster) -> Iterator[FakeProvider]:
    """The fake provider where the cluster's pods reach it; no provider key or endpoint from this environment
    leaks in."""
    for var in PROVIDER_VARS:
        monkeypatch.delenv(var, raising=False)
    with FakeProvider(host="127.0.0.1" if kube.kind else GATEWAY) as server:
        if kube.kind:
            server.listen_in_netns(*kind_node_network())
        yield server


def test_two_model_skill_run_in_cluster_matches_the_local_run(
    space: Space, provider: FakeProvider, skill: Path, grader_image: str, tmp_path: Path
) -> None:
    models = Models(provider)
    flags = ("--model-name", "openai/a", "--model-name", "openai/b", "--skill", str(skill), *SELECTION,
             "--image", grader_image)  # fmt: skip
    models.reset()
    local = subprocess.run(
        [sys.executable, "-m", "wpbench_k8s", "run", *flags, "--execution-concurrency", "2",
         "--output", str(tmp_path / "local" / "results.json")],
        capture_output=True, text=True, cwd=REPO, timeout=900, env={**space.env, **model_env(provider)},
    )  # fmt: skip
    assert local.returncode == 0, local.stderr[-4000:]
    (local_jsonl,) = (tmp_path / "local").glob("results_*.jsonl")
    (local_json,) = (tmp_path / "local").glob("results_*.json")

    models.reset()
    name = space.cli("submit", *flags, "--max-in-flight", "2").stdout.strip()
    assert provider.calls() == 0  # submit calls no model
    space.install_controller(secret_env=model_env(provider, for_pods=True))
    run = space.wait_phase(name, 900)
    st = run["status"]
    # 3 tests x 2 models x 2 variants; a passes everything, b only with the skill.
    counts = (st["phase"], st["done"], st["total"], st["passed"], st["failed"], st["errors"], st["infraErrors"])
    assert counts == ("Succeeded", 12, 12, 9, 3, 0, 0), (st, space.controller_log()[-3000:])

    res = space.cli("results", name, "-o", str(tmp_path / "k8s" / "results.jsonl"))
    got = records(tmp_path / "k8s" / "results.jsonl")
    assert [comparable(r) for r in got] == [comparable(r) for r in records(local_jsonl)]
    assert sorted({r["test_id"] for r in got}) == sorted(EXPECTED_TESTS)
    for r in got:
        assert r["error"] is None and r["mode"] == "models"
        if r["type"] == "execution":
            assert r["grader"]["verdict"] is not None  # graded by the real verifier in a grader pod
    by = {(r["model"], r["variant"], r["test_id"]): r for r in got}
    limited = by[("openai/a", "baseline", RATE_LIMITED)]
    assert (limited["usage"]["retries"], limited["usage"]["calls"]) == (2, 3)  # the 429s cost retries, not failures
    assert provider.calls("a") == 6 + 2 and provider.calls("b") == 6  # one call per item, nothing repeated
    assert all(r["_authorization"] == "Bearer sk-fake-secret-key" for r in provider.requests)
    summary = json.loads((tmp_path / "k8s" / "results.json").read_text())
    assert summary_sections(summary) == summary_sections(json.loads(local_json.read_text()))
    assert "Skill Impact" in res.stdout
    # The controller ran the whole model run inside the chart's limits: never restarted, never OOM-killed.
    (pod,) = space.controller_pods()
    (container,) = pod.status.container_statuses
    assert container.restart_count == 0 and container.last_state.terminated is None
    limit = pod.spec.containers[0].resources.limits["memory"]
    peak = controller_memory_peak(pod.metadata.uid, container.container_id)
    print(f"controller pod, two-model skill run: cgroup memory peak {peak >> 20} MiB (limit {limit})")


def controller_memory_peak(pod_uid: str, container_id: str) -> int:
    """The container's memory high-water mark, read from the node's cgroup (v1, cgroupfs driver; v2 fallback)."""
    cid = container_id.split("://")[-1]
    # kind's kubelets run in node containers, so their pods' cgroups sit below the node container's, named by
    # the systemd driver (kubelet-kubepods-<qos>-pod<uid, _ for ->.slice/cri-containerd-<id>.scope)
    slice_uid = pod_uid.replace("-", "_")
    for pattern in (f"/sys/fs/cgroup/memory/**/kubepods*/**/pod{pod_uid}/{cid}/memory.max_usage_in_bytes",
                    f"/sys/fs/cgroup/memory/**/*-pod{slice_uid}.slice/cri-containerd-{cid}.scope/memory.max_usage_in_bytes",
                    f"/sys/fs/cgroup/**/kubepods*/**/pod{pod_uid}/{cid}/memory.peak"):  # fmt: skip
        for path in glob.glob(pattern, recursive=True):
            return int(Path(path).read_text())
    raise AssertionError(f"no cgroup found for container {cid} of pod {pod_uid}")


def test_an_outage_and_a_missing_key_error_only_their_models_records_and_the_run_goes_on(
    space: Space, provider: FakeProvider, tmp_path: Path
) -> None:
    """Through the in-cluster controller: openai/down answers 503 to every call; anthropic has no key in
    the controller's Secret; openai/flaky answers 503 twice for the knowledge test, then recovers."""
    flaky_left = {"n": 2}
    lock = threading.Lock()

    def flaky(body: dict[str, Any]) -> Reply:
        test = BY_PROMPT[user_text(body)]
        with lock:
            if test.id == "mini-k-002" and flaky_left["n"] > 0:
                flaky_left["n"] -= 1
                return server_error(503)
        return Reply(content=good_answer(test))

    provider.script("down", server_error(503))
    provider.respond("flaky", flaky)
    name = space.cli(
        "submit", "--model-name", "openai/down", "--model-name", "anthropic/claude-sonnet-4-20250514",
        "--model-name", "openai/flaky", "--continue-on-error", "--test-id", "mini-hooks-001", "--test-id", "mini-k-002",
        "--dataset-path", str(MINI),
    ).stdout.strip()  # fmt: skip
    space.install_controller(secret_env=model_env(provider, for_pods=True))
    run = space.wait_phase(name, 900)
    st = run["status"]
    assert (st["phase"], st["done"], st["errors"], st["passed"], st["infraErrors"]) == ("Succeeded", 6, 4, 2, 0), st
    assert "errors 4" in space.cli("status", name).stdout
    res = space.cli("results", name, "-o", str(tmp_path / "r.jsonl"))
    by_model: dict[str, list[dict[str, Any]]] = {}
    for r in records(tmp_path / "r.jsonl"):
        by_model.setdefault(r["model"], []).append(r)
    down = by_model["openai/down"]
    assert all((r["error"] or "").startswith("openai/down: provider unavailable") for r in down), down
    assert all(r["usage"]["calls"] == 6 and r["grader"]["status"] == "not_graded" for r in down)
    claude = by_model["anthropic/claude-sonnet-4-20250514"]
    assert all("missing API key: set ANTHROPIC_API_KEY" in (r["error"] or "") for r in claude)
    assert all(r["usage"]["calls"] == 0 for r in claude)  # checked before any request
    flaky_records = {r["test_id"]: r for r in by_model["openai/flaky"]}
    assert all(r["error"] is None and r["scores"]["execution_pass"] for r in flaky_records.values())
    assert flaky_records["mini-k-002"]["usage"]["retries"] == 2  # the 503s cost retries, not the record
    assert flaky_records["mini-hooks-001"]["grader"]["verdict"] is not None  # graded in a real grader pod
    summary = json.loads((tmp_path / "r.json").read_text())
    rows = {row["model"]: row for row in summary["comparison"]["rows"]}
    assert (rows["openai/down"]["excluded"], rows["openai/down"]["score"]) == (2, None)
    assert (rows["openai/flaky"]["excluded"], rows["openai/flaky"]["score"]) == (0, 1.0)
    assert summary["overall"]["excluded"] == 4 and "skill_impact" not in summary
    assert "2 excluded record(s): openai/down: provider unavailable" in res.stdout
    assert "missing API key" in res.stdout
    assert provider.calls("down") == 12  # 6 attempts for each of its two items, each made once
    assert space.pods is not None and space.pods.per_item() == {flaky_records["mini-hooks-001"]["item_id"]: 1}
    space.wait_for(lambda: not space.objects("pods"), 120, "the grader pod to go")


def test_status_advances_and_cancel_is_seen_while_the_controller_calls_models(
    space: Space, provider: FakeProvider
) -> None:
    """Knowledge answers need no pod, so no in-flight slot bounds their model calls: the in-cluster
    controller still stores records, writes status and sees a cancel while calls are running."""

    def slow(body: dict[str, Any]) -> Reply:
        return Reply(content=good_answer(BY_PROMPT[user_text(body)]), delay=3)

    provider.respond("slow", slow)
    name = space.cli("submit", "--model-name", "openai/slow", "--test-type", "knowledge", "--runs", "20",
                     "--dataset-path", str(MINI)).stdout.strip()  # fmt: skip
    total = 40  # 2 knowledge tests x 20 runs, 3 s of model call each, 4 model workers: ~30 s
    space.install_controller(secret_env=model_env(provider, for_pods=True))

    def first_answers() -> dict[str, Any] | None:
        status = space.run_object(name).get("status") or {}
        return status if status.get("done", 0) > 0 else None

    status = space.wait_for(first_answers, 300, "the first stored answers")
    assert status["phase"] == "Running" and status["done"] < total and status["passed"] == status["done"]
    line = space.cli("status", name).stdout
    assert "Running" in line and f"/{total} done" in line
    space.cli("cancel", name)
    run = space.wait_phase(name, 120)
    assert run["status"]["phase"] == "Cancelled"
    calls = provider.calls("slow")
    assert calls < total and run["status"]["done"] == calls  # every answer paid for was stored, once
    time.sleep(5)
    assert provider.calls("slow") == calls  # and no call after the cancel
