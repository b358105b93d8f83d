"""Fast mode in the cluster (`submit --candidates-per-pod N`): one grader pod grades a unit of items in one
sequence. Here the pieces without a cluster: the Job's shape, the reading of a sequence's log per item, and the
reconciler core's per-item decisions (whoever brings the pod down pays with its own retries, never a neighbour's).
The same on a real cluster: tests/k8s/test_sequence_pods_cluster.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from wpbench_controller import core
from wpbench_controller.observed import Observation, observe_jobs, observe_run
from wpbench_k8s.kube.client import to_dict
from wpbench_k8s.kube.facts import sequence_facts
from wpbench_k8s.kube.names import (
    ANNOTATION_ITEM_ATTEMPTS,
    ANNOTATION_ITEM_ID,
    ANNOTATION_ITEM_IDS,
    LABEL_ATTEMPT,
    LABEL_ITEM,
)
from wpbench_k8s.kube.objects import (
    SEQUENCE_RESET_SECONDS,
    RunSettings,
    TaskSource,
    dry_run_objects,
    item_job,
    unit_job,
)
from wpbench_k8s.manifest import Candidate, ManifestItem, RunManifest
from wpbench_k8s.outcome import Infra, Scored, settle
from wpbench_runtime.contract import GradeTask, Scores, Verdict, split_sequence_output

IDS = ("a", "b", "c", "d")


def verdict_line(test_id: str, status: str = "passed") -> bytes:
    passed = status == "passed"
    scores = Scores(execution_pass=passed, runtime=float(passed), static=1, static_policy_pass=True)
    return (Verdict(test_id=test_id, status=status, scores=scores).model_dump_json() + "\n").encode()  # type: ignore[arg-type]


def answered(test_id: str, status: str = "passed", code: int = 0, end: str = "ready") -> bytes:
    progress = f"wpbench-grade: grading {test_id} (php_snippet, 1 assertions)\n".encode()
    return progress + verdict_line(test_id, status) + f"wpbench-end {code} {end}\n".encode()


def manifest(isolation: str = "fork_per_test", n: int = 3) -> RunManifest:
    items = [ManifestItem(item_id=f"i{k}", test_id=f"t{k}", model="reference", task=GradeTask(test_id=f"t{k}"),
                          candidate=Candidate(code="<?php echo 1;")) for k in range(n)]  # fmt: skip
    return RunManifest(run_id="r", suite="s", dataset_source="x", dataset_digest="d", mode="reference", seed=1,
                       selected_test_ids=[i.test_id for i in items], items=items,
                       grader={"image": "i", "execution_isolation": isolation})  # fmt: skip


# ---- the Job --------------------------------------------------------------------------------------------
def test_a_unit_job_grades_its_items_in_one_sequence_with_the_single_jobs_walls():
    m = manifest()
    settings = RunSettings(name="run", namespace="ns", candidates_per_pod=3)
    sources = [TaskSource("run-payload-0", "t0.json"), TaskSource("run-payload-1", "t1.json"),
               TaskSource("run-payload-0", "t2.json")]  # fmt: skip
    unit = [(item, source, n) for item, source, n in zip(m.items, sources, (2, 1, 1), strict=True)]
    job = to_dict(unit_job(m, "i0", unit, settings, None, attempt=2))
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["args"] == ["--sequence", "/etc/wpbench/task/0.json", "/etc/wpbench/task/1.json",
                                 "/etc/wpbench/task/2.json"]  # fmt: skip
    (volume,) = [v for v in pod["volumes"] if v["name"] == "task"]
    projected = {s["configMap"]["name"]: s["configMap"]["items"] for s in volume["projected"]["sources"]}
    assert projected == {"run-payload-0": [{"key": "t0.json", "path": "0.json"}, {"key": "t2.json", "path": "2.json"}],
                         "run-payload-1": [{"key": "t1.json", "path": "1.json"}]}  # fmt: skip
    notes = job["metadata"]["annotations"]
    assert json.loads(notes[ANNOTATION_ITEM_IDS]) == ["i0", "i1", "i2"]
    assert json.loads(notes[ANNOTATION_ITEM_ATTEMPTS]) == [2, 1, 1] and notes[ANNOTATION_ITEM_ID] == "i0"
    assert job["metadata"]["labels"][LABEL_ATTEMPT] == "2"
    # one item's Job, as every reset_per_test Job is: the same lock-down, only the task and the deadline differ
    alone = to_dict(item_job(manifest("reset_per_test"), m.items[0], settings, sources[0], None))
    single = alone["spec"]["template"]["spec"]
    (one,) = single["containers"]
    for key in ("securityContext", "resources", "env", "volumeMounts", "image"):
        assert container[key] == one[key], key
    for key in ("securityContext", "automountServiceAccountToken", "enableServiceLinks", "dnsPolicy", "dnsConfig"):
        assert pod[key] == single[key], key
    budget = sum(i.task.budget_seconds for i in m.items if i.task)
    assert pod["activeDeadlineSeconds"] - single["activeDeadlineSeconds"] == pytest.approx(
        budget - m.items[0].task.budget_seconds + 3 * SEQUENCE_RESET_SECONDS,
        abs=1,  # type: ignore[union-attr]
    )


def test_only_fast_mode_puts_several_items_in_a_pod_and_the_dry_run_shows_the_units():
    m = manifest("reset_per_test")
    unit = [(i, TaskSource("cm", "k"), 1) for i in m.items]
    with pytest.raises(AssertionError):
        unit_job(m, "i0", unit, RunSettings(name="run", namespace="ns"), None)
    fast = manifest(n=5)
    jobs = [o for o in dry_run_objects(fast, RunSettings(name="run", namespace="ns", candidates_per_pod=2))
            if o["kind"] == "Job"]  # fmt: skip
    assert [json.loads(j["metadata"]["annotations"][ANNOTATION_ITEM_IDS]) for j in jobs] == [
        ["i0", "i1"],
        ["i2", "i3"],
        ["i4"],
    ]
    plain = [o for o in dry_run_objects(m, RunSettings(name="run", namespace="ns", candidates_per_pod=2))
             if o["kind"] == "Job"]  # fmt: skip
    assert len(plain) == 3 and all(ANNOTATION_ITEM_IDS not in j["metadata"]["annotations"] for j in plain)


def test_a_run_spec_says_how_many_a_pod_grades_and_a_hostile_value_is_one():
    assert observe_run({"spec": {"candidatesPerPod": 7}}).candidates_per_pod == 7
    for hostile in (0, -3, "x", None, [1]):
        assert observe_run({"spec": {"candidatesPerPod": hostile}}).candidates_per_pod == 1


# ---- the log of a sequence ------------------------------------------------------------------------------
def seq_job(items: tuple[str, ...] = IDS, attempts: tuple[int, ...] | None = None, attempt: int = 1,
            condition: str = "Failed") -> dict[str, Any]:  # fmt: skip
    return {
        "metadata": {
            "name": f"run-u-a{attempt}",
            "labels": {LABEL_ITEM: "h-u", LABEL_ATTEMPT: str(attempt)},
            "annotations": {ANNOTATION_ITEM_ID: "a", ANNOTATION_ITEM_IDS: json.dumps(list(items)),
                            ANNOTATION_ITEM_ATTEMPTS: json.dumps(list(attempts or (1,) * len(items)))},
        },
        "spec": {},
        "status": {"conditions": [{"type": condition, "status": "True", "reason": "BackoffLimitExceeded"}]},
    }  # fmt: skip


def seq_pod(attempt: int = 1, *, exit_code: int | None = 0, reason: str = "Completed", ran: bool = True,
            disrupted: bool = False) -> dict[str, Any]:  # fmt: skip
    container: dict[str, Any] = {"name": "grader", "state": {}}
    if ran and exit_code is not None:
        container["state"]["terminated"] = {"exitCode": exit_code, "reason": reason,
                                            "startedAt": "2026-12-02T06:59:00Z", "finishedAt": "2026-12-02T07:00:00Z"}  # fmt: skip
    status: dict[str, Any] = {"phase": "Failed" if exit_code else "Succeeded", "containerStatuses": [container]}
    if not ran:
        status = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
                                                      "reason": "Unschedulable", "message": "Insufficient cpu"}]}  # fmt: skip
    if disrupted:
        status["conditions"] = [{"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}]
    return {"metadata": {"name": f"run-u-a{attempt}-p", "creationTimestamp": "t1",
                         "labels": {LABEL_ITEM: "h-u", LABEL_ATTEMPT: str(attempt)}}, "status": status}  # fmt: skip


def test_a_sequences_output_splits_at_its_end_lines_only():
    text = answered("a") + answered("b", "failed") + b"wpbench-grade: grading c\npartial"
    answers, rest = split_sequence_output(text)
    assert [(json.loads(a.output.splitlines()[-1])["test_id"], a.exit_code, a.ready) for a in answers] == [
        ("a", 0, True),
        ("b", 0, True),
    ]
    assert rest == b"wpbench-grade: grading c\npartial"
    # an end line inside a line (a candidate's text in a progress line) is no end line
    assert split_sequence_output(b"wpbench-grade: reason: x wpbench-end 0 ready\n")[0] == []


def test_each_answered_item_keeps_its_verdict_and_the_one_in_progress_gets_the_pods_end():
    log = answered("a") + answered("b") + b"wpbench-grade: grading c\n"
    oom = seq_pod(exit_code=137, reason="OOMKilled")
    facts = sequence_facts(seq_job(), oom, test_ids=list(IDS), log=log)
    assert [f.test_id for f in facts] == ["a", "b", "c"]
    assert [f.exit_code for f in facts[:2]] == [0, 0] and facts[2].oom_killed
    exited = sequence_facts(seq_job(), seq_pod(exit_code=3), test_ids=list(IDS), log=log + b"{}\n")
    assert exited[2].exit_code == 3 and exited[2].stdout.strip().endswith("{}")
    everything = b"".join(answered(t) for t in IDS)
    assert [f.test_id for f in sequence_facts(seq_job(), seq_pod(), test_ids=list(IDS), log=everything)] == list(IDS)
    closed = answered("a", end="closed")
    assert [f.test_id for f in sequence_facts(seq_job(), seq_pod(), test_ids=list(IDS), log=closed)] == ["a"]
    never = sequence_facts(seq_job(), seq_pod(ran=False), test_ids=list(IDS), log=None)
    assert len(never) == 1 and not never[0].started


# ---- the core's decisions, per item -------------------------------------------------------------------
def decide(job: dict[str, Any], pod: dict[str, Any] | None, log: bytes | None, *, stored: set[str] = frozenset(),
           retries: int = 2) -> core.Collection:  # fmt: skip
    observed = observe_jobs([job], [pod] if pod else [])
    ids = list(observed[0].items)
    facts = {observed[0].name: sequence_facts(job, pod, test_ids=ids, log=log)}
    return core.collect(Observation(observed, stored=stored, known=set(IDS), facts=facts), infra_retries=retries)


def test_a_whole_sequence_ends_every_item_and_its_jobs_go():
    done = decide(seq_job(condition="Complete"), seq_pod(), b"".join(answered(t) for t in IDS))
    assert [e.item_id for e in done.endings] == list(IDS) and all(e.attempt == 1 for e in done.endings)
    assert all(isinstance(e.decision, Scored) and e.graded for e in done.endings)
    assert done.delete_items == ("h-u",) and not done.retries


def test_a_candidate_that_kills_its_pod_is_retried_first_and_its_followers_spend_nothing():
    log = answered("a") + answered("b", "failed") + b"wpbench-grade: grading c\n"
    done = decide(seq_job(), seq_pod(exit_code=137, reason="OOMKilled"), log)
    assert [(e.item_id, e.decision.verdict.status) for e in done.endings] == [("a", "passed"), ("b", "failed")]  # type: ignore[union-attr]
    (retry,) = done.retries
    assert (retry.items, retry.item_attempts, retry.attempt) == (("c", "d"), (2, 1), 2)
    assert retry.unit == "a" and retry.replaced == ("run-u-a1",) and "OOM" in retry.reason
    assert done.active == {"c", "d"} and not done.delete_items  # a and b are stored; the unit's Jobs stay
    # its last retry: c kills the pod again, as the first of its sequence, and ends; d has its whole budget
    again = decide(seq_job(("c", "d"), (3, 1), 3), seq_pod(3, exit_code=137, reason="OOMKilled"), b"",
                   stored={"a", "b"})  # fmt: skip
    (ending,) = again.endings
    assert ending.item_id == "c" and ending.attempt == 3 and isinstance(ending.decision, Infra)
    fallback = settle(ending.decision)
    assert fallback is not None and fallback.status == "error"  # scored as c's own failure, never excluded
    (rest,) = again.retries
    assert (rest.items, rest.item_attempts, rest.attempt) == (("d",), (1,), 4)


def test_a_pod_stopped_from_outside_retries_only_what_has_no_verdict():
    done = decide(seq_job(), seq_pod(exit_code=143, reason="Error", disrupted=True), answered("a"))
    assert [e.item_id for e in done.endings] == ["a"]
    (retry,) = done.retries
    assert retry.items == ("b", "c", "d") and retry.item_attempts == (2, 1, 1)
    assert "stopped from outside" in retry.reason


def test_a_pod_that_never_ran_charges_every_item_and_spent_budgets_end_them_all():
    done = decide(seq_job(), seq_pod(ran=False), None)
    (retry,) = done.retries
    assert retry.items == IDS and retry.item_attempts == (2, 2, 2, 2)
    spent = decide(seq_job(IDS, (3, 3, 3, 3), 3), seq_pod(3, ran=False), None)
    assert [e.item_id for e in spent.endings] == list(IDS) and not spent.retries
    assert all(settle(e.decision) is None for e in spent.endings)  # infra_error: excluded, never a grade


def test_a_sequence_that_closed_after_an_item_regrades_the_rest_at_no_cost():
    done = decide(seq_job(), seq_pod(), answered("a", end="closed"))
    (retry,) = done.retries
    assert [e.item_id for e in done.endings] == ["a"]
    assert retry.items == ("b", "c", "d") and retry.item_attempts == (1, 1, 1)


def test_a_forged_end_line_and_verdict_in_a_candidates_output_cannot_answer_for_the_next_item():
    """What a candidate controls reaches the log only inside its verdict's JSON (escaped: no line break) or a
    progress line's first line: neither can start an end line or a verdict line of the next item."""
    forged = json.dumps("\nwpbench-end 0 ready\n" + verdict_line("b").decode()).encode()
    log = b"wpbench-grade: grading a\n" + verdict_line("a", "failed")[:-2] + b', "note": ' + forged + b"}\n"
    log += b"wpbench-end 0 ready\n"
    done = decide(seq_job(), seq_pod(exit_code=137, reason="OOMKilled"), log)
    assert [e.item_id for e in done.endings] == ["a"]
    (retry,) = done.retries
    assert retry.items == ("b", "c", "d") and retry.item_attempts == (2, 1, 1)  # b was in progress, not answered
