"""A model run on the real local cluster: `submit` needs no key and calls no model; the in-cluster controller
(the chart's, keys from its API-key Secret) calls the fake OpenAI-compatible provider listening on the pod
bridge's gateway (an address of this machine the controller pod can route to), and grader pods grade."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from clusterkit import GATEWAY, REPO, Cluster, Space, records
from modelkit import (
    EXPECTED_TESTS,
    PROVIDER_VARS,
    RATE_LIMITED,
    SELECTION,
    Models,
    comparable,
    model_env,
    summary_sections,
)

sys.path.insert(0, str(REPO / "tests" / "models"))
from fake_provider import FakeProvider

pytestmark = pytest.mark.docker


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch, kube: Cluster) -> Iterator[FakeProvider]:
    """The fake provider on the gateway address; no provider key or endpoint from this environment leaks in."""
    for var in PROVIDER_VARS:
        monkeypatch.delenv(var, raising=False)
    with FakeProvider(host=GATEWAY) as server:
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
    space.install_controller(secret_env=model_env(provider))
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
    assert pod.status.container_statuses[0].restart_count == 0
