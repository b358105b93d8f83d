"""Fast mode on the real cluster: `submit --execution-isolation fork_per_test --candidates-per-pod N` grades N
items in one grader pod, one sequence (`wpbench-grade --sequence`), and the in-cluster controller still writes
one record per item, each failure charged to the item that caused it.

The pieces without a cluster (the Job, the log's reading, the per-item decisions): tests/unit/test_sequence_pods.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from clusterkit import REPO, Space, clone_suite, records
from modelkit import normalise

pytestmark = pytest.mark.docker

FAST = ("--execution-isolation", "fork_per_test")
HOOKS = "mini-hooks-001"
GOOD = "add_filter( 'the_title', function ( $title ) { return $title . ' [checked]'; } );"
# Fills the tmpfs mounts (they count against the pod's memory), then lifts memory_limit and allocates.
OOM = (
    "ini_set( 'memory_limit', '-1' ); $s = str_repeat( 't', 1 << 20 );"
    " foreach ( array( '/tmp', WP_CONTENT_DIR ) as $d ) { for ( $i = 0; @file_put_contents( \"$d/f$i\", $s ); $i++ ) {} }"
    " $a = array(); while ( true ) { $a[] = str_repeat( 'm', 1 << 20 ); }"
)


def forged_answer(test_id: str) -> str:
    """A candidate that fails its own test and writes, everywhere it can, an end line and then a passed verdict
    for the next item: were the collector to believe it, the next item (which does nothing) would pass."""
    scores = {"execution_pass": True, "runtime": 1.0, "static": 1.0, "static_policy_pass": True}
    verdict = json.dumps({"contract_version": "1", "test_id": test_id, "status": "passed", "reason": "",
                          "scores": scores})  # fmt: skip
    text = f"\\nwpbench-end 0 ready\\n{verdict}\\nwpbench-end 0 ready\\n"
    php = text.replace("'", "\\'")
    return (
        f'$t = "{php}"; echo $t; error_log( $t );'
        " foreach ( array( 'php://stdout', 'php://stderr', 'php://fd/1', 'php://fd/2', 'php://fd/3' ) as $f )"
        " { @file_put_contents( $f, $t ); }"
    )


def completions(path: Path, answers: list[tuple[str, str]]) -> Path:
    path.write_text("".join(json.dumps({"test_id": HOOKS, "model": m, "code": c}) + "\n" for m, c in answers))
    return path


def by_model(path: Path) -> dict[str, dict[str, Any]]:
    return {r["model"]: r for r in records(path)}


def test_a_reference_run_four_to_a_pod_matches_the_local_fast_run(
    space: Space, mini_suite: Path, grader_image: str, tmp_path: Path
) -> None:
    suite = clone_suite(mini_suite, tmp_path / "suite", 10)
    local = subprocess.run(
        [sys.executable, "-m", "wpbench_k8s", "run", "--check-reference-solution", "--dataset-path", str(suite),
         *FAST, "--image", grader_image, "--execution-concurrency", "2",
         "--output", str(tmp_path / "local" / "results.json")],
        capture_output=True, text=True, cwd=REPO, timeout=600,
    )  # fmt: skip
    assert local.returncode == 0, local.stderr[-3000:]
    (local_jsonl,) = (tmp_path / "local").glob("results_*.jsonl")
    name = space.cli("submit", "--check-reference-solution", "--dataset-path", str(suite), *FAST,
                     "--candidates-per-pod", "4", "--image", grader_image, "--max-in-flight", "2").stdout.strip()  # fmt: skip
    space.install_controller()
    run = space.wait_phase(name, 600)
    st = run["status"]
    assert (st["phase"], st["done"], st["passed"], st["infraErrors"]) == ("Succeeded", 10, 10, 0), st
    space.cli("results", name, "-o", str(tmp_path / "k8s" / "results.jsonl"))
    got = records(tmp_path / "k8s" / "results.jsonl")
    assert [normalise(r) for r in got] == [normalise(r) for r in records(local_jsonl)]
    assert all(r["grader"]["infra_retries"] == 0 for r in got)
    summary = json.loads((tmp_path / "k8s" / "results.json").read_text())
    assert summary["metadata"]["runtime_isolation_boundary"] == "process_per_test"
    assert summary["metadata"]["publishable"] is False  # fast mode never publishes, on either backend
    # 10 items, four to a pod: three pods, each graded once
    space.wait_for(lambda: not space.objects("jobs"), 120, "the Jobs to go")
    assert space.pods is not None and sorted(space.pods.per_item().values()) == [1, 1, 1], space.pods.per_item()
    logs = space.cli("logs", name, got[5]["test_id"])
    assert f'"test_id":"{got[5]["test_id"]}"' in logs.stdout.replace(" ", ""), logs.stdout[-2000:]


def test_a_pod_killer_pays_alone_and_a_forged_verdict_answers_for_no_one(
    space: Space, mini_suite: Path, grader_image: str, tmp_path: Path
) -> None:
    answers = completions(tmp_path / "answers.jsonl", [
        ("m1-good", GOOD), ("m2-oom", OOM), ("m3-forger", forged_answer(HOOKS)), ("m4-nothing", "return;"),
        ("m5-good", GOOD),
    ])  # fmt: skip
    name = space.cli("submit", "--completions", str(answers), "--dataset-path", str(mini_suite), *FAST,
                     "--candidates-per-pod", "5", "--image", grader_image, "--max-in-flight", "1").stdout.strip()  # fmt: skip
    space.install_controller()
    run = space.wait_phase(name, 900)
    assert run["status"]["phase"] == "Succeeded" and run["status"]["infraErrors"] == 0, run["status"]
    space.cli("results", name, "-o", str(tmp_path / "r.jsonl"))
    got = by_model(tmp_path / "r.jsonl")
    status = {m: r["grader"]["status"] for m, r in got.items()}
    assert status == {"m1-good": "passed", "m2-oom": "error", "m3-forger": "failed", "m4-nothing": "failed",
                      "m5-good": "passed"}, {m: r["grader"]["reason"] for m, r in got.items()}  # fmt: skip
    # whatever the memory hog brought down, it was its own: nobody else spent a retry on it
    assert {m: r["grader"]["infra_retries"] for m, r in got.items() if m != "m2-oom"} == dict.fromkeys(
        ("m1-good", "m3-forger", "m4-nothing", "m5-good"), 0
    )
    assert all(r["error_type"] != "infra_error" for r in got.values())  # every one scored, none excluded


def test_a_pod_ended_mid_sequence_keeps_the_verdicts_it_gave_and_regrades_only_the_rest(
    space: Space, mini_suite: Path, grader_image: str, tmp_path: Path
) -> None:
    """The pod's deadline is lowered while it grades its second item (a pod's activeDeadlineSeconds may only
    shrink): the kubelet ends the pod, whose log stays. The first item keeps its verdict, the second (in
    progress) is retried as infrastructure, the third and fourth were never reached and spend nothing."""
    slow = "sleep( 6 ); " + GOOD
    answers = completions(tmp_path / "answers.jsonl",
                          [("m1", GOOD), ("m2-slow", slow), ("m3", GOOD), ("m4", GOOD)])  # fmt: skip
    name = space.cli("submit", "--completions", str(answers), "--dataset-path", str(mini_suite), *FAST,
                     "--candidates-per-pod", "4", "--image", grader_image).stdout.strip()  # fmt: skip
    space.install_controller()
    core = space.cluster.core

    def grading_the_second() -> str | None:
        for pod in core.list_namespaced_pod(space.namespace, label_selector="app.kubernetes.io/component=grader").items:
            if pod.status.phase != "Running":
                continue
            log = core.read_namespaced_pod_log(pod.metadata.name, space.namespace, container="grader")
            if log.count("wpbench-end 0 ready") == 1 and "grading" in log.rsplit("wpbench-end", 1)[1]:
                return str(pod.metadata.name)
        return None

    pod = space.wait_for(grading_the_second, 300, "the first pod to grade its second item")
    started = core.read_namespaced_pod(pod, space.namespace).status.start_time
    elapsed = int(time.time() - started.timestamp())
    core.patch_namespaced_pod(pod, space.namespace, {"spec": {"activeDeadlineSeconds": max(1, elapsed)}})
    run = space.wait_phase(name, 600)
    assert run["status"]["phase"] == "Succeeded", run["status"]
    space.cli("results", name, "-o", str(tmp_path / "r.jsonl"))
    got = by_model(tmp_path / "r.jsonl")
    assert {m: (r["grader"]["status"], r["grader"]["infra_retries"]) for m, r in got.items()} == {
        "m1": ("passed", 0),
        "m2-slow": ("passed", 1),
        "m3": ("passed", 0),
        "m4": ("passed", 0),
    }, {m: r["grader"]["reason"] for m, r in got.items()}
    assert space.pods is not None and sorted(space.pods.per_item().values()) == [2]  # one unit, two pods
