"""Model runs through the Kubernetes simulation: `submit` needs no key and calls no model; the real
controller process does the generation against a fake OpenAI-compatible provider on 127.0.0.1, with
OPENAI_API_BASE and a dummy OPENAI_API_KEY in its environment (as the chart's API-key Secret
provides them); `results` gives the records, comparison and Skill Impact a local run gives.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from simkit import NAMESPACE, REPO, Sim, records
from test_docker_pods import normalise

from wpbench_k8s.dataset import ExecutionTest, KnowledgeTest, load_suite
from wpbench_k8s.models.prompts import build_prompt

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))
from fake_provider import FakeProvider, Reply, has_system, rate_limited, server_error, user_text

MINI = REPO / "tests" / "fixtures" / "suites" / "mini"
SUITE = load_suite(MINI)
BY_PROMPT = {build_prompt(t): t for t in SUITE.all_tests()}
# --limit 3 of the mini suite: two execution tests and one knowledge test.
SELECTION = ("--dataset-path", str(MINI), "--limit", "3")
EXPECTED_TESTS = ["mini-hooks-001", "mini-shortcodes-001", "mini-k-002"]
RATE_LIMITED = "mini-hooks-001"  # model a's first two calls for this test (baseline) get 429s
PROVIDER_VARS = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE", "ANTHROPIC_API_KEY", "GEMINI_API_KEY",
                 "GOOGLE_API_KEY")  # fmt: skip
FAST_RETRIES = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "WPBENCH_MODEL_RETRY_INITIAL_SECONDS": "0.01",
    "WPBENCH_MODEL_RETRY_JITTER_SECONDS": "0",
    "WPBENCH_MODEL_RETRY_MAX_SECONDS": "0.05",
}


def good_answer(test: Any) -> str:
    if isinstance(test, ExecutionTest):
        return f"Here is the code:\n\n```php\n<?php\n{test.reference_solution}\n```\n\nIt uses the WordPress API."
    assert isinstance(test, KnowledgeTest)
    return f"The answer is {test.correct_answer}." if test.type == "multiple_choice" else test.correct_answer


def bad_answer(test: Any) -> str:
    if isinstance(test, ExecutionTest):
        return "```php\nfunction wpbp_nothing() {}\n```"
    return "A" if test.type == "multiple_choice" else "esc_html"


class Models:
    """openai/a answers right, but its first two calls for RATE_LIMITED (baseline) are 429s; openai/b
    answers right only with the skill. Per prompt, not per call order, so a local run (concurrent) and
    the controller (in manifest order) see the 429s on the same item."""

    def __init__(self, provider: FakeProvider) -> None:
        self.provider = provider
        self.lock = threading.Lock()
        self.limited = 0
        provider.respond("a", self.a)
        provider.respond("b", self.b)

    def reset(self) -> None:
        with self.lock:
            self.limited = 2
            self.provider.requests.clear()
            self.provider.statuses.clear()

    def a(self, body: dict[str, Any]) -> Reply:
        test = BY_PROMPT[user_text(body)]
        if test.id == RATE_LIMITED and not has_system(body):
            with self.lock:
                if self.limited > 0:
                    self.limited -= 1
                    return rate_limited()
        return Reply(content=good_answer(test), prompt_tokens=300, completion_tokens=80)

    def b(self, body: dict[str, Any]) -> Reply:
        test = BY_PROMPT[user_text(body)]
        return Reply(content=good_answer(test) if has_system(body) else bad_answer(test))


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProvider]:
    """The fake provider; no provider key or endpoint from this environment reaches the CLI or controller."""
    for var in PROVIDER_VARS:
        monkeypatch.delenv(var, raising=False)
    with FakeProvider() as server:
        yield server


@pytest.fixture
def skill(tmp_path: Path) -> Path:
    path = tmp_path / "wp-skill"
    path.mkdir()
    (path / "SKILL.md").write_text("---\nname: wp-skill\n---\nUse the WordPress APIs.\n")
    return path


def model_env(provider: FakeProvider) -> dict[str, str]:
    """What the controller gets from the chart's API-key Secret (plus fast retries for the tests)."""
    return {**FAST_RETRIES, "OPENAI_API_BASE": provider.url, "OPENAI_API_KEY": "sk-fake-secret-key"}


def summary_sections(summary: dict[str, Any]) -> dict[str, Any]:
    """The comparison and Skill Impact sections without what differs between any two runs (latency)."""
    out = json.loads(json.dumps({k: summary[k] for k in ("comparison", "skill_impact")}))
    for row in out["comparison"]["rows"]:
        row["latency_ms_mean"] = None
    for delta in out["comparison"]["skills_delta"]:
        delta["latency_ms_mean"] = None
    return out


def comparable(record: dict[str, Any]) -> dict[str, Any]:
    rec = normalise(record)
    rec["usage"]["cost_usd"] = 0.0
    return rec


@pytest.mark.docker
def test_two_model_skill_run_through_the_cluster_matches_the_local_run(
    docker_sim: Sim, provider: FakeProvider, skill: Path, grader_image: str, tmp_path: Path
) -> None:
    sim = docker_sim
    models = Models(provider)
    flags = ("--model-name", "openai/a", "--model-name", "openai/b", "--skill", str(skill), *SELECTION,
             "--image", grader_image)  # fmt: skip

    # The local run, against the same provider and the same grader image.
    models.reset()
    local = subprocess.run(
        [sys.executable, "-m", "wpbench_k8s", "run", *flags, "--execution-concurrency", "2",
         "--output", str(tmp_path / "local" / "results.json")],
        capture_output=True, text=True, cwd=REPO, timeout=900, env={**sim.env, **model_env(provider)},
    )  # fmt: skip
    assert local.returncode == 0, local.stderr[-4000:]
    (local_jsonl,) = (tmp_path / "local").glob("results_*.jsonl")
    (local_json,) = (tmp_path / "local").glob("results_*.json")
    assert ("a", 429) in provider.statuses

    # The cluster run: submit without any key; the controller has them.
    models.reset()
    name = sim.cli("submit", *flags, "--max-in-flight", "2").stdout.strip()
    assert "Pending" in sim.cli("status", name).stdout
    assert provider.calls() == 0  # submit calls no model
    sim.start_controller(env=model_env(provider))
    run = sim.wait_phase(name, 900)
    st = run["status"]
    assert st["phase"] == "Succeeded", (st, sim.controller_log()[-3000:])
    # 3 tests x 2 models x 2 variants; a passes everything, b only with the skill.
    counts = (st["done"], st["total"], st["passed"], st["failed"], st["errors"], st["infraErrors"])
    assert counts == (12, 12, 9, 3, 0, 0)
    assert sim.cluster.kubelet.max_concurrent <= 2
    status = sim.cli("status", name).stdout
    assert "Succeeded" in status and "12/12 done" in status and "passed 9" in status and "errors 0" in status

    res = sim.cli("results", name, "-o", str(tmp_path / "k8s" / "results.jsonl"))
    got = records(tmp_path / "k8s" / "results.jsonl")
    want = records(local_jsonl)

    # Records: both models x both variants x the selected tests, the same as the local run's.
    assert {(r["model"], r["variant"]) for r in got} == {
        (m, v) for m in ("openai/a", "openai/b") for v in ("baseline", "with-skills")
    }
    assert sorted({r["test_id"] for r in got}) == sorted(EXPECTED_TESTS)
    assert [comparable(r) for r in got] == [comparable(r) for r in want]
    by = {(r["model"], r["variant"], r["test_id"]): r for r in got}
    for test_id in EXPECTED_TESTS:
        assert by[("openai/b", "baseline", test_id)]["scores"]["execution_pass"] is False
        assert by[("openai/b", "with-skills", test_id)]["scores"]["execution_pass"] is True
        assert by[("openai/a", "baseline", test_id)]["scores"]["execution_pass"] is True
    for r in got:
        assert r["error"] is None and r["mode"] == "models"
        if r["type"] == "execution":
            assert r["grader"]["verdict"] is not None  # graded by the real verifier in a grader pod

    # The 429s cost retries, not failures.
    limited = by[("openai/a", "baseline", RATE_LIMITED)]
    assert (limited["usage"]["retries"], limited["usage"]["calls"]) == (2, 3)
    assert limited["scores"]["execution_pass"] is True
    assert sum(r["usage"]["retries"] for r in got) == 2
    assert provider.statuses.count(("a", 429)) == 2
    assert provider.calls("a") == 6 + 2 and provider.calls("b") == 6  # one call per item, nothing repeated
    assert all(r["_authorization"] == "Bearer sk-fake-secret-key" for r in provider.requests)

    # The summary has the local run's comparison and Skill Impact; stdout shows the tables.
    summary = json.loads((tmp_path / "k8s" / "results.json").read_text())
    local_summary = json.loads(local_json.read_text())
    assert summary_sections(summary) == summary_sections(local_summary)
    rows = {(row["model"], row["variant"]): row for row in summary["comparison"]["rows"]}
    assert rows[("openai/a", "baseline")]["retries"] == 2 and rows[("openai/a", "baseline")]["excluded"] == 0
    assert rows[("openai/b", "with-skills")]["pass_rate"] == 1.0
    impact = {m["model"]: m for m in summary["skill_impact"]["models"]}
    assert impact["openai/b"]["counts"]["fixed"] == 3 and impact["openai/a"]["counts"]["still_passing"] == 3
    assert summary["metadata"]["skills"][0]["name"] == "wp-skill"
    assert summary["metadata"]["skills"] == local_summary["metadata"]["skills"]
    for heading in ("model comparison", "Δ skills", "Skill Impact", "openai/b: 3 fixed"):
        assert heading in res.stdout, res.stdout


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
