"""A run survives its machine (issue 16) and the Engine API executor keeps the lockdown (issue 14).

Real faults against the real engine and grader image: SIGKILL of the CLI and --resume, a full
output filesystem, the verdict cache, containers stopped from outside. The daemon restart runs
on a private engine in test_daemon_restart.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docker
import pytest
from faultkit import assert_same_records, cli_args, final_records, make_suite, run, wait_for_records

from wpbench_k8s.executor.docker import (
    RUN_LABEL,
    DockerExecutor,
    engine_client,
    lockdown_args,
    lockdown_host_config,
    read_attach_stream,
)
from wpbench_k8s.manifest import GraderSpec
from wpbench_k8s.outcome import MAX_GRADER_OUTPUT_BYTES, GraderFacts, Infra, decide_outcome
from wpbench_runtime.contract import Assertion, GradeTask, RuntimeChecks

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> Path:
    return make_suite(tmp_path_factory.mktemp("suite"), 6)


@pytest.fixture(scope="module")
def uninterrupted(grader_image, suite, tmp_path_factory) -> list[dict]:
    """The records of the same run, graded once without any fault (and without the cache)."""
    out = tmp_path_factory.mktemp("clean")
    res = run(cli_args(suite, out, grader_image, "--execution-concurrency", "2", "--no-cache"))
    assert res.returncode == 0, res.stderr[-3000:]
    records = final_records(out)
    assert [r["grader"]["status"] for r in records] == ["passed"] * 6
    return records


# ---- the lockdown through the Engine API ---------------------------------------------------------
LOCKDOWN_FIELDS = ("NetworkMode", "IpcMode", "ReadonlyRootfs", "CapDrop", "SecurityOpt", "NanoCpus", "Memory", "MemorySwap",
                   "PidsLimit", "Tmpfs")  # fmt: skip


def test_engine_api_container_has_every_lockdown_flag_of_the_cli(grader_image):
    api = engine_client()
    spec = GraderSpec(image=grader_image)
    by_cli = subprocess.run(["docker", "create", "--label", f"{RUN_LABEL}=lockdown-test", *lockdown_args(spec),
                             grader_image], capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    by_api = api.create_container(grader_image, user="65532:65532", stdin_open=True,
                                  labels={RUN_LABEL: "lockdown-test"},
                                  host_config=lockdown_host_config(api, spec))["Id"]  # fmt: skip
    try:
        cli_seen, api_seen = api.inspect_container(by_cli), api.inspect_container(by_api)
        for key in LOCKDOWN_FIELDS:
            assert api_seen["HostConfig"][key] == cli_seen["HostConfig"][key], key
        assert api_seen["Config"]["User"] == cli_seen["Config"]["User"] == "65532:65532"
        assert api_seen["Config"]["StdinOnce"] is True and api_seen["Config"]["OpenStdin"] is True
        assert api_seen["HostConfig"]["LogConfig"]["Type"] == "none"  # the host keeps no grader output
    finally:
        for cid in (by_cli, by_api):
            api.remove_container(cid, force=True)


def test_grader_output_is_read_with_a_bound(grader_image):
    """10 MiB on stdout: the executor keeps MAX_GRADER_OUTPUT_BYTES and says it dropped the rest."""
    api = engine_client()
    cid = api.create_container(grader_image, entrypoint=["php", "-r", "echo str_repeat('x', 10 << 20);"],
                               stdin_open=True, labels={RUN_LABEL: "bound-test"},
                               host_config=lockdown_host_config(api, GraderSpec(image=grader_image)))["Id"]  # fmt: skip
    try:
        sock = api.attach_socket(cid, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})._sock
        api.start(cid)
        sock.shutdown(1)
        out = read_attach_stream(sock, time.monotonic() + 120)
        sock.close()
    finally:
        api.remove_container(cid, force=True)
    assert len(out.stdout) == MAX_GRADER_OUTPUT_BYTES and out.truncated


# ---- stopped from outside ------------------------------------------------------------------------
SLOW_TASK = GradeTask(
    test_id="outside-stop",
    code="function outside_wait() { sleep( 30 ); return 1; }",
    runtime_checks=RuntimeChecks(
        assertions=[Assertion.model_validate({"type": "returns_value", "function": "outside_wait", "expected": 1})]
    ),
)


class _WatchedExecutor(DockerExecutor):
    """Says which container got the task: the executor keeps others started ahead of need, idle until then."""

    grading: str | None = None

    def _grade_in(self, spare: Any, *args: Any, **kwargs: Any) -> GraderFacts:
        self.grading = spare.container
        return super()._grade_in(spare, *args, **kwargs)


def _stopped_while_grading(image: str, run_id: str, stop: Callable[[docker.APIClient, str], None]) -> GraderFacts:
    """Grade SLOW_TASK and call `stop(api, container)` once WordPress has booted and the candidate sleeps."""
    executor = _WatchedExecutor(GraderSpec(image=image), run_id)
    executor.preflight()
    api = docker.APIClient()
    result: dict = {}
    worker = threading.Thread(target=lambda: result.update(facts=executor.run_grader(SLOW_TASK)))
    worker.start()
    deadline = time.monotonic() + 60
    while executor.grading is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert executor.grading is not None, "the grader never ran"
    time.sleep(2)  # WordPress has booted; the candidate sleeps
    stop(api, executor.grading)
    worker.join(120)
    executor.cleanup()
    return result["facts"]


@pytest.mark.parametrize("how", [["stop", "-t", "1"], ["kill"]])
def test_a_grader_stopped_from_outside_is_infrastructure(grader_image, how):
    def engine_stop(api: docker.APIClient, container: str) -> None:
        subprocess.run(["docker", *how, container], check=True, capture_output=True)

    facts = _stopped_while_grading(grader_image, f"outside-{how[0]}", engine_stop)
    decision = decide_outcome(facts)
    assert isinstance(decision, Infra) and decision.fallback is None, facts
    assert "stopped from outside" in decision.reason


# ---- SIGKILL and --resume ------------------------------------------------------------------------
def test_sigkill_mid_run_then_resume_loses_and_duplicates_nothing(grader_image, suite, uninterrupted, tmp_path):
    out = tmp_path / "out"
    proc = subprocess.Popen(cli_args(suite, out, grader_image, "--execution-concurrency", "2", "--no-cache"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=str(Path(__file__).parents[2]))  # fmt: skip
    partial = wait_for_records(out, 2)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    kept = len(partial.read_text().splitlines())
    assert kept < 6, "the run finished before it was killed"
    res = run([*cli_args(suite, out, grader_image)[:4], "--resume", str(partial), "--no-cache"])
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"resuming: {kept} kept, {6 - kept} to grade" in res.stderr.replace("\n", " ")
    assert_same_records(final_records(out), uninterrupted)
    # Resuming a finished run grades nothing and writes the same records again.
    (jsonl,) = out.glob("results_*.jsonl")
    before = jsonl.read_text()
    again = run([*cli_args(suite, out, grader_image)[:4], "--resume", str(jsonl)])
    assert again.returncode == 0, again.stderr[-3000:]
    assert "0 to grade" in again.stderr and jsonl.read_text() == before


def test_resume_refuses_flags_that_plan_another_run(grader_image, suite, tmp_path):
    out = tmp_path / "out"
    res = run(cli_args(suite, out, grader_image, "--test-id", "fault-001", "--no-cache"))
    assert res.returncode == 0, res.stderr[-3000:]
    (jsonl,) = out.glob("results_*.jsonl")
    other = run([*cli_args(suite, out, grader_image), "--test-id", "fault-002", "--resume", str(jsonl)])
    assert other.returncode == 2
    assert "plan a different run" in other.stderr and "differs in" in other.stderr


# ---- output disk full ----------------------------------------------------------------------------
@pytest.fixture
def small_tmpfs(tmp_path):
    mount = tmp_path / "tiny"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode()[-200:]}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def test_output_disk_full_mid_run_is_a_clear_error_and_resumable(grader_image, suite, uninterrupted, small_tmpfs):
    res = run(cli_args(suite, small_tmpfs, grader_image, "--execution-concurrency", "2", "--no-cache"))
    assert res.returncode == 5, res.stderr[-3000:]
    (partial,) = small_tmpfs.glob("results_*.jsonl.partial")
    assert f"cannot write {partial}: No space left on device" in res.stderr.replace("\n", "")
    lines = partial.read_text().splitlines()
    assert 0 < len(lines) < 6
    for line in lines:
        json.loads(line)  # every line whole: a failed append leaves no half record
    subprocess.run(["mount", "-o", "remount,size=4m", str(small_tmpfs)], check=True)
    again = run([*cli_args(suite, small_tmpfs, grader_image)[:4], "--resume", str(partial), "--no-cache"])
    assert again.returncode == 0, again.stderr[-3000:]
    assert_same_records(final_records(small_tmpfs), uninterrupted)


# ---- the verdict cache ---------------------------------------------------------------------------
def test_cache_hit_is_byte_for_byte_and_one_changed_byte_misses(grader_image, suite, uninterrupted, tmp_path):
    cache = tmp_path / "cache"
    on = {"WPBENCH_NO_CACHE": "0"}  # tests/conftest.py turns the cache off for every other test
    first, second, third = (tmp_path / n for n in ("first", "second", "third"))
    res = run(cli_args(suite, first, grader_image, "--execution-concurrency", "2", "--cache-dir", str(cache)), on)
    assert res.returncode == 0, res.stderr[-3000:]
    graded = final_records(first)
    assert not any(r["cached"] for r in graded)
    res = run(cli_args(suite, second, grader_image, "--cache-dir", str(cache)), on)
    assert res.returncode == 0, res.stderr[-3000:]
    hits = final_records(second)
    assert all(r["cached"] for r in hits)
    for fresh, hit in zip(graded, hits, strict=True):
        assert json.dumps(hit["grader"]["verdict"]) == json.dumps(fresh["grader"]["verdict"])  # byte for byte
    assert_same_records(hits, uninterrupted)
    (summary,) = second.glob("results_*.json")
    assert json.loads(summary.read_text())["metadata"]["cache"] == {"enabled": True, "cached_records": 6}
    # One byte of one test changes (the expected value): that test is graded again, the rest hit.
    changed = make_suite(tmp_path, 6, name="changed")
    path = changed / "execution" / "timing.json"
    tests = json.loads(path.read_text())
    tests[2]["runtime_checks"]["assertions"][0]["expected"] = 4  # was 3: now fails
    path.write_text(json.dumps(tests, indent=1))
    res = run(cli_args(changed, third, grader_image, "--cache-dir", str(cache)), on)
    assert res.returncode == 1, res.stderr[-3000:]  # the changed reference fails
    records = final_records(third)
    assert [r["cached"] for r in records] == [True, True, False, True, True, True]
    assert records[2]["grader"]["status"] == "failed"


def test_a_sigkill_the_engine_did_not_send_is_retried_then_scored(grader_image):
    """PID 1 SIGKILLed with no kill from the engine (the kernel's OOM killer, or the host): the candidate may have
    caused it, so it is retried and then scored, never excluded. Here the host kills the grader's PID 1."""

    def host_kill(api: docker.APIClient, container: str) -> None:
        os.kill(api.inspect_container(container)["State"]["Pid"], signal.SIGKILL)

    facts = _stopped_while_grading(grader_image, "outside-host-kill", host_kill)
    decision = decide_outcome(facts)
    assert isinstance(decision, Infra) and decision.fallback is not None, facts
    assert decision.fallback.status == "error" and decision.fallback.scores.execution_pass is False
