"""Model runs through the Kubernetes simulation (the two-model skill run is on the real cluster:
test_models_cluster.py): `submit` needs no key and calls no model; the real
controller process does the generation against a fake OpenAI-compatible provider on 127.0.0.1, with
OPENAI_API_BASE and a dummy OPENAI_API_KEY in its environment (as the chart's API-key Secret
provides them); `results` gives the records, comparison and Skill Impact a local run gives.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from modelkit import BY_PROMPT, MINI, PROVIDER_VARS, SELECTION, Models, good_answer, model_env
from simkit import NAMESPACE, REPO, Sim, records

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))
from fake_provider import FakeProvider, Reply, server_error, user_text


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProvider]:
    """The fake provider; no provider key or endpoint from this environment reaches the CLI or controller."""
    for var in PROVIDER_VARS:
        monkeypatch.delenv(var, raising=False)
    with FakeProvider() as server:
        yield server


def test_missing_key_and_outage_in_the_controller_error_their_records_and_the_run_goes_on(
    sim: Sim, provider: FakeProvider, tmp_path: Path
) -> None:
    """Pods answer instantly here (FakeRunner); what is under test is the controller's model calls."""
    Models(provider)
    provider.script("down", server_error(503))
    name = sim.cli(
        "submit", "--model-name", "openai/down", "--model-name", "anthropic/claude-sonnet-4-20250514",
        "--model-name", "openai/a", "--continue-on-error", "--test-id", "mini-hooks-001", "--test-id", "mini-k-002",
        "--dataset-path", str(MINI),
    ).stdout.strip()  # fmt: skip
    sim.start_controller(env=model_env(provider))
    run = sim.wait_phase(name, 300)
    st = run["status"]
    assert (st["phase"], st["done"], st["errors"], st["passed"], st["infraErrors"]) == ("Succeeded", 6, 4, 2, 0)
    assert "errors 4" in sim.cli("status", name).stdout
    res = sim.cli("results", name, "-o", str(tmp_path / "r.jsonl"))
    by_model: dict[str, list[dict[str, Any]]] = {}
    for r in records(tmp_path / "r.jsonl"):
        by_model.setdefault(r["model"], []).append(r)
    down = by_model["openai/down"]
    assert all((r["error"] or "").startswith("openai/down: provider unavailable") for r in down)
    assert all(r["usage"]["calls"] == 6 and r["grader"]["status"] == "not_graded" for r in down)
    claude = by_model["anthropic/claude-sonnet-4-20250514"]
    assert all("missing API key: set ANTHROPIC_API_KEY" in (r["error"] or "") for r in claude)
    assert all(r["usage"]["calls"] == 0 for r in claude)  # checked before any request
    assert all(r["error"] is None and r["scores"]["execution_pass"] for r in by_model["openai/a"])
    summary = json.loads((tmp_path / "r.json").read_text())
    rows = {row["model"]: row for row in summary["comparison"]["rows"]}
    assert (rows["openai/down"]["excluded"], rows["openai/down"]["score"]) == (2, None)
    assert (rows["openai/a"]["excluded"], rows["openai/a"]["score"]) == (0, 1.0)
    assert summary["overall"]["excluded"] == 4 and "skill_impact" not in summary
    assert "2 excluded record(s): openai/down: provider unavailable" in res.stdout
    assert "missing API key" in res.stdout
    assert provider.calls("down") == 12  # 6 attempts for each of its two items, each made once
    assert not sim.cluster.objects("pods", NAMESPACE)


def test_status_advances_and_cancel_is_seen_while_the_controller_calls_models(
    sim: Sim, provider: FakeProvider, tmp_path: Path
) -> None:
    """Knowledge answers need no pod, so no in-flight slot bounds their model calls: the controller
    still stores records, writes status and sees a cancel every few seconds of calls."""

    def slow(body: dict[str, Any]) -> Reply:
        return Reply(content=good_answer(BY_PROMPT[user_text(body)]), delay=0.5)

    provider.respond("slow", slow)
    name = sim.cli("submit", "--model-name", "openai/slow", "--test-type", "knowledge", "--runs", "20",
                   "--dataset-path", str(MINI)).stdout.strip()  # fmt: skip
    sim.start_controller(env=model_env(provider))  # 40 items x 0.5 s of model call each
    status = sim.wait_for(
        lambda: (sim.run_object(name).get("status") or {}).get("done", 0) > 0 and sim.run_object(name)["status"],
        60,
        "the first stored answers",
    )
    assert status["phase"] == "Running" and status["done"] < 40 and status["passed"] == status["done"]
    line = sim.cli("status", name).stdout
    assert "Running" in line and "/40 done" in line
    sim.cli("cancel", name)
    run = sim.wait_phase(name, 30)
    assert run["status"]["phase"] == "Cancelled"
    calls = provider.calls("slow")
    assert calls < 40 and run["status"]["done"] == calls  # every answer paid for was stored, once
    time.sleep(1)
    assert provider.calls("slow") == calls  # and no call after the cancel


@pytest.mark.docker
def test_controller_image_runs_a_model_run_within_the_chart_limits(
    sim: Sim, provider: FakeProvider, skill: Path, tmp_path: Path
) -> None:
    """The controller image as the chart runs it (read-only root, /tmp a 16 MiB memory emptyDir, the
    chart's memory limit, keys as environment variables from the Secret) generates a model run."""
    import yaml

    image = "wpbench-controller:dev"
    if (
        shutil.which("docker") is None
        or subprocess.run(["docker", "image", "inspect", image], capture_output=True).returncode != 0
    ):
        pytest.skip(f"{image} not built (make controller-image)")
    values = yaml.safe_load((REPO / "charts" / "wpbench-k8s" / "values.yaml").read_text())
    memory = values["controller"]["resources"]["limits"]["memory"]
    assert memory.endswith("Mi")
    Models(provider).reset()
    sim.kubeconfig.chmod(0o644)
    sim.kubeconfig.parent.chmod(0o755)
    name = sim.cli("submit", "--model-name", "openai/a", "--model-name", "openai/b", "--skill", str(skill),
                   *SELECTION).stdout.strip()  # fmt: skip
    container = f"wpbench-ctl-models-{name}"
    env_flags = [f for k, v in model_env(provider).items() for f in ("-e", f"{k}={v}")]
    proc = subprocess.Popen(
        ["docker", "run", "--name", container, "--network", "host", "--read-only", "--user", "65532:65532",
         "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--tmpfs", "/tmp:size=16m",
         "--memory", memory.removesuffix("Mi") + "m", "--memory-swap", memory.removesuffix("Mi") + "m",
         *env_flags, "-v", f"{sim.kubeconfig}:/kc:ro", image,
         "--kubeconfig", "/kc", "--namespace", NAMESPACE, "--health-port", "0", "--resync-seconds", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        sim.wait_for(lambda: proc.poll() is not None or sim.run_object(name).get("status", {}).get("phase")
                     in ("Succeeded", "Failed"), 180, "the run or the controller to end")  # fmt: skip
        run = sim.run_object(name)
        peak = subprocess.run(["docker", "exec", container, "sh", "-c", "cat /sys/fs/cgroup/memory.peak 2>/dev/null"
                               " || cat /sys/fs/cgroup/memory/memory.max_usage_in_bytes"],
                              capture_output=True, text=True).stdout.strip()  # fmt: skip
    finally:
        subprocess.run(["docker", "stop", "-t", "5", container], capture_output=True)
        oom = subprocess.run(["docker", "inspect", "--format", "{{.State.OOMKilled}}", container],
                             capture_output=True, text=True).stdout.strip()  # fmt: skip
        out = proc.communicate(timeout=30)[0]
        subprocess.run(["docker", "rm", "-f", container], capture_output=True)
        assert oom == "false", f"the controller was OOM-killed at the chart's limit {memory}:\n{out[-2000:]}"
    st = run["status"]
    assert (st["phase"], st["done"], st["errors"]) == ("Succeeded", 12, 0), out[-3000:]
    assert provider.calls("a") == 6 + 2 and provider.calls("b") == 6
    if peak.isdigit():
        print(f"controller image, model run: cgroup memory peak {int(peak) >> 20} MiB (limit {memory})")
