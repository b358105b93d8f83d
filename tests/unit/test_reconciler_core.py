"""The reconciler's decisions (controller/wpbench_controller/core.py) over hand-made observations.

Jobs and pods are written as the API server reports them and read by `observed.py`, the facts by
`wpbench_k8s.kube.facts` (what the shell does); then the pure steps decide. No cluster and no API server:
the same paths on a real cluster are tests/k8s/test_controller_cluster.py, test_kueue_cluster.py,
test_failure_parity.py and test_requeue_cache.py.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from wpbench_controller import core
from wpbench_controller.conditions import is_true, run_conditions
from wpbench_controller.controller import Controller
from wpbench_controller.core import Continue, Finish, Pending
from wpbench_controller.informer import Informers
from wpbench_controller.observed import (
    Observation,
    ObservedJob,
    ObservedPod,
    PayloadChunk,
    observe_jobs,
    observe_payload_chunk,
    observe_pod,
    observe_run,
)
from wpbench_k8s.kube.client import WatchEvent
from wpbench_k8s.kube.facts import attempt_facts
from wpbench_k8s.kube.names import ANNOTATION_ITEM_ID, ANNOTATION_KUEUE_DEACTIVATED, LABEL_ATTEMPT, LABEL_ITEM
from wpbench_k8s.manifest import Candidate, ManifestItem, RunManifest
from wpbench_k8s.outcome import Infra, Scored, settle
from wpbench_k8s.records import Record
from wpbench_k8s.steps import score_item
from wpbench_runtime.contract import GradeTask, Scores, Verdict

NOW = "2026-12-02T07:00:00Z"
VERDICT = Verdict(
    test_id="t", status="passed", scores=Scores(execution_pass=True, runtime=1, static=1, static_policy_pass=True)
)
LOG = (VERDICT.model_dump_json() + "\n").encode()


# ---- objects as the API server reports them -------------------------------------------------------------
def job(item: str, attempt: int = 1, *conditions: str, suspend: bool = False, kueue: str = "") -> dict[str, Any]:
    annotations = {ANNOTATION_ITEM_ID: item}
    if kueue:
        annotations[ANNOTATION_KUEUE_DEACTIVATED] = kueue
    return {
        "metadata": {
            "name": f"run-{item}-a{attempt}",
            "labels": {LABEL_ITEM: f"h-{item}", LABEL_ATTEMPT: str(attempt)},
            "annotations": annotations,
        },
        "spec": {"suspend": suspend},
        "status": {"conditions": [{"type": c, "status": "True", "reason": "BackoffLimitExceeded"} for c in conditions]},
    }


def pod(item: str, attempt: int = 1, *, exit_code: int | None = None, phase: str = "", created: str = "t1",
        unschedulable: str = "", image: str = "") -> dict[str, Any]:  # fmt: skip
    status: dict[str, Any] = {}
    if phase:
        status["phase"] = phase
    container: dict[str, Any] = {"name": "grader", "state": {}}
    if exit_code is not None:
        container["state"]["terminated"] = {"exitCode": exit_code, "reason": "Completed",
                                            "startedAt": "2026-12-02T06:59:58Z", "finishedAt": "2026-12-02T07:00:00Z"}  # fmt: skip
    if image:
        container["imageID"] = image
    status["containerStatuses"] = [container]
    if unschedulable:
        status["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                 "message": unschedulable}]  # fmt: skip
    return {
        "metadata": {"name": f"run-{item}-a{attempt}-{created}", "creationTimestamp": created,
                     "labels": {LABEL_ITEM: f"h-{item}", LABEL_ATTEMPT: str(attempt)}},
        "status": status,
    }  # fmt: skip


def observe(jobs: list[dict[str, Any]], pods: list[dict[str, Any]] = (), *, stored: set[str] = frozenset(),
            known: set[str] | None = None, logs: dict[str, bytes | None] | None = None) -> Observation:  # fmt: skip
    """What the shell builds: the Jobs, then the facts of those `to_decide` names (`logs`: pod -> its log;
    a pod missing from it has a log that did not answer this time)."""
    observed = observe_jobs(list(jobs), list(pods))
    ids = {i for j in observed for i in j.items}
    observation = Observation(observed, stored=stored, known=known if known is not None else ids)
    facts = {}
    for finished in core.to_decide(observation):
        p = finished.pod
        if p is not None and logs is not None and p.name not in logs:
            facts[finished.name] = None
            continue
        log = (logs or {}).get(p.name, LOG) if p is not None else None
        facts[finished.name] = [
            attempt_facts(finished.source, p.source if p else None, test_id="t", log=log, events=[])
        ]
    return Observation(observed, stored=observation.stored, known=observation.known, facts=facts)


# ---- step 1: collect ------------------------------------------------------------------------------------
def test_a_finished_job_ends_its_item_with_the_graders_verdict_and_all_its_jobs_go_by_label():
    obs = observe([job("a", 1, "Complete")], [pod("a", 1, exit_code=0, phase="Succeeded", image="sha256:x")])
    done = core.collect(obs, infra_retries=2)
    (ending,) = done.endings
    assert ending.item_id == "a" and isinstance(ending.decision, Scored) and ending.graded
    assert ending.decision.verdict.status == "passed" and ending.attempt == 1
    assert ending.job.pod is not None and ending.job.pod.image_id == "sha256:x"
    # the record is stored (shell) before the deletion the same collection decided: by item label, every attempt
    assert done.delete_items == ("h-a",) and done.delete_jobs == () and not done.retries and not done.active


def test_an_infra_failure_with_retries_left_starts_the_next_attempt_and_the_old_one_goes_only_with_it():
    obs = observe([job("a", 1, "Failed")], [pod("a", 1, phase="Failed", unschedulable="0/1 nodes: Insufficient cpu")])
    done = core.collect(obs, infra_retries=1)
    (retry,) = done.retries
    assert retry.items == ("a",) and retry.attempt == 2 and retry.replaced == ("run-a-a1",)
    assert "grader did not run" in retry.reason and "Insufficient cpu" in retry.reason
    assert done.active == {"a"} and not done.endings and not done.delete_items and not done.delete_jobs


def test_retries_spent_end_the_item_as_infra_error_excluded_from_the_score():
    jobs = [job("a", 1, "Failed"), job("a", 2, "Failed")]
    obs = observe(jobs, [pod("a", 2, phase="Failed", unschedulable="Insufficient cpu")])
    done = core.collect(obs, infra_retries=1)
    (ending,) = done.endings
    assert isinstance(ending.decision, Infra) and not ending.graded and ending.attempt == 2
    assert settle(ending.decision) is None  # infra_error, no fallback verdict
    assert done.delete_items == ("h-a",) and not done.retries
    item = ManifestItem(item_id="a", test_id="t", model="reference", task=GradeTask(test_id="t"),
                        candidate=Candidate(code="<?php echo 1;"))  # fmt: skip
    manifest = RunManifest(run_id="r", suite="s", dataset_source="x", dataset_digest="d", mode="reference", seed=1,
                           selected_test_ids=["t"], grader={"image": "i"}, items=[item])  # fmt: skip
    record = score_item(manifest, item, (ending.decision, ending.attempt - 1))
    assert record.error_type == "infra_error" and "after 2 attempts" in (record.error or "")
    (event,) = core.pass_events([], [record])
    assert event[:2] == ("Warning", "InfraError") and "a (" in event[2]


def test_a_job_that_failed_with_its_pod_gone_was_stopped_from_outside():
    done = core.collect(observe([job("a", 1, "Failed")]), infra_retries=0)
    (ending,) = done.endings
    assert isinstance(ending.decision, Infra) and "stopped from outside" in ending.decision.reason
    assert "pod gone" in ending.decision.reason


def test_failure_target_alone_counts_as_failed():
    (observed,) = observe_jobs([job("a", 1, "FailureTarget")], [])
    assert observed.failed and observed.finished and not observed.complete
    done = core.collect(observe([job("a", 1, "FailureTarget")]), infra_retries=1)
    assert done.retries and done.retries[0].attempt == 2 and "stopped from outside" in done.retries[0].reason


def test_a_job_kueue_deactivated_ends_as_infrastructure_never_waits():
    why = "Deactivated: The workload is deactivated"
    jobs = [job("a", 1, suspend=True, kueue=why)]
    (observed,) = observe_jobs(jobs, [])
    assert observed.finished and observed.suspended and observed.kueue_deactivated == why
    done = core.collect(observe(jobs), infra_retries=0)
    (ending,) = done.endings
    assert isinstance(ending.decision, Infra) and "Kueue deactivated its Workload" in ending.decision.reason
    assert done.queued == 0 and done.starting == 0


def test_suspended_jobs_are_queued_not_starting_and_pending_pods_are_starting():
    jobs = [job("a", suspend=True), job("b"), job("c"), job("d")]
    pods = [pod("c", phase="Pending", unschedulable="0/1 nodes are available"), pod("d", phase="Running")]
    done = core.collect(observe(jobs, pods), infra_retries=2)
    assert done.active == {"a", "b", "c", "d"}
    assert (done.queued, done.starting) == (1, 2)  # b: no pod yet; c: Pending; d runs
    assert done.waiting == ("run-c-a1-t1: Unschedulable: 0/1 nodes are available",)
    ending = core.conclude(total=4, done=0, aborted=None, in_flight=4, waiting=(), queued=1, queue="lq", requeue=None)
    assert (
        isinstance(ending, Continue) and ending.message == "1 grader Job(s) queued in LocalQueue lq (Kueue admits them)"
    )


def test_an_item_already_stored_is_only_deleted_never_decided_again():
    jobs = [job("a", 1, "Complete"), job("a", 2)]
    obs = observe(jobs, [pod("a", 1, exit_code=0)], stored={"a"})
    assert core.to_decide(obs) == ()  # its log is never read again
    done = core.collect(obs, infra_retries=2)
    assert done.delete_items == ("h-a",) and not done.endings and not done.retries and not done.active
    # a Job of an item the run does not have goes the same way
    stray = core.collect(observe([job("x")], known={"a"}), infra_retries=2)
    assert stray.delete_items == ("h-x",) and not stray.active


def test_older_attempts_of_a_running_item_go_one_by_one():
    done = core.collect(observe([job("a", 2), job("a", 1, "Failed")]), infra_retries=2)
    assert done.delete_jobs == ("run-a-a1",) and done.active == {"a"} and not done.delete_items


def test_a_log_that_does_not_answer_keeps_the_item_in_flight_and_looks_again_soon():
    obs = observe([job("a", 1, "Complete")], [pod("a", 1, exit_code=0)], logs={})
    assert [j.name for j in core.to_decide(obs)] == ["run-a-a1"] and obs.facts == {"run-a-a1": None}
    done = core.collect(obs, infra_retries=2)
    assert done.active == {"a"} and done.requeue == core.LOG_RETRY_SECONDS and not done.endings
    assert not done.delete_items


def test_the_newest_pod_of_the_attempt_is_the_one_read():
    pods = [pod("a", 1, exit_code=1, created="t1"), pod("a", 1, exit_code=0, created="t2"), pod("a", 2, created="t9")]
    (observed,) = observe_jobs([job("a", 1, "Complete")], pods)
    assert observed.pod is not None and observed.pod.name == "run-a-a1-t2"


def test_hostile_job_shapes_are_read_without_raising():
    bare: dict[str, Any] = {"metadata": {"name": "j", "labels": {LABEL_ATTEMPT: "x"}, "annotations": None},
                            "status": None, "spec": None}  # fmt: skip
    observed, empty = observe_jobs([bare, {}], [])
    assert observed == ObservedJob(name="j", items=("",), item_label="", attempt=1)
    assert not observed.finished and observed.pod is None and empty.name == ""
    assert observe_pod({"metadata": None, "status": None}) == ObservedPod("", "", 1, "", "Pending", "", "")


def test_a_job_is_shaped_to_grade_several_items_in_order():
    unit = ObservedJob(name="j", items=("a", "b"), item_label="h-ab", attempt=1)
    obs = Observation((unit,), stored=set(), known={"a", "b"})
    assert core.collect(obs, infra_retries=1).active == {"a", "b"}
    settled = Observation((unit,), stored={"a", "b"}, known={"a", "b"})
    assert core.collect(settled, infra_retries=1).delete_items == ("h-ab",)


# ---- step 2: schedule -----------------------------------------------------------------------------------
def graders(*ids: str) -> list[Pending]:
    return [Pending(i, "grader") for i in ids]


def plan(pending: list[Pending], *, active: int = 0, starting: int = 0, max_in_flight: int = 2,
         creates_per_pass: int = 100, max_starting: int = 40) -> core.Starts:  # fmt: skip
    return core.schedule(pending, active=active, starting=starting, max_in_flight=max_in_flight,
                         creates_per_pass=creates_per_pass, max_starting=max_starting)  # fmt: skip


def test_a_first_pass_creates_up_to_the_in_flight_bound():
    starts = plan(graders("a", "b", "c"), max_in_flight=2)
    assert [p.item_id for p in starts.jobs] == ["a", "b"] and starts.requeue is None
    assert plan(graders("c"), active=2, max_in_flight=2).jobs == ()  # the bound is full


def test_creates_per_pass_and_max_starting_cap_a_pass():
    many = graders(*(f"i{n}" for n in range(10)))
    per_pass = plan(many, max_in_flight=100, creates_per_pass=3)
    assert len(per_pass.jobs) == 3 and per_pass.requeue == 0.0  # its share written: the run comes round again
    starting = plan(many, max_in_flight=100, starting=38, max_starting=40)
    assert len(starting.jobs) == 2 and starting.requeue == core.STARTING_SECONDS  # pods start: look again soon
    full = plan(many, max_in_flight=100, starting=45, max_starting=40)
    assert full.jobs == () and full.requeue == core.STARTING_SECONDS


def test_pending_items_are_read_only_while_there_is_room():
    read: list[str] = []

    def lazily():
        for i in ("a", "b", "c", "d"):
            read.append(i)
            yield Pending(i, "grader")

    plan(lazily(), max_in_flight=2)
    assert read == ["a", "b"]  # c's need (a model call, ...) is never looked at this pass


def test_model_calls_take_slots_and_items_scored_without_a_pod_do_not():
    record = Record.model_construct(item_id="k")
    pending = [
        Pending("m", "model"),
        Pending("k", "none", record=record),
        Pending("g", "grader"),
        Pending("h", "grader"),
    ]
    starts = plan(pending, max_in_flight=2)
    assert starts.model_calls == 1 and starts.records == (record,) and [p.item_id for p in starts.jobs] == ["g"]
    assert starts.requeue == 0.0  # records stored: more may be schedulable now
    assert starts.requeue_after(failed=1) == core.CREATE_RETRY_SECONDS and starts.requeue_after(0) == 0.0


def test_stored_and_running_items_are_never_created_again():
    order = ["a", "b", "c", "d", "e"]
    cursor = core.advance(order, 0, {"a", "b", "d"})
    assert cursor == 2
    assert list(core.unstarted(order, cursor, {"a", "b", "d"}, {"c"})) == ["e"]
    assert core.advance(order, 0, set(order)) == 5 and list(core.unstarted(order, 5, set(), set())) == []


# ---- step 3: conclude, and the status -------------------------------------------------------------------
def test_all_done_finishes_succeeded_with_its_conditions_and_one_event():
    ending = core.conclude(total=3, done=3, aborted=None, in_flight=0, waiting=(), queued=0, queue="", requeue=0.0)
    assert ending == Finish("Succeeded", "3 items graded", "AllGraded")
    old = {"phase": "Running", "startTime": "s", "conditions": run_conditions(None, "Running", "Grading", "", 1, "t")}
    new = {"observedGeneration": 1, "phase": "Succeeded", "message": ending.message, "completionTime": NOW}
    write = core.status_write(old, new, reason=ending.reason, now=NOW, force=True, since_write=0.0, interval=2.0)
    conditions = write.patch["conditions"]
    assert is_true(conditions, "Succeeded") and is_true(conditions, "Ready") and not is_true(conditions, "Running")
    assert (
        write.patch["phase"] == "Succeeded" and write.patch["completionTime"] == NOW and "startTime" not in write.patch
    )
    assert write.events == (("Normal", "Finished"),) and write.message == "3 items graded"


def test_the_first_error_stops_the_run_once_nothing_is_in_flight():
    args = {"total": 3, "done": 1, "aborted": "a", "waiting": (), "queued": 0, "queue": "", "requeue": None}
    assert isinstance(core.conclude(in_flight=1, **args), Continue)
    ending = core.conclude(in_flight=0, **args)
    assert isinstance(ending, Finish) and ending.phase == "Failed" and ending.reason == "StoppedAtFirstError"


def test_waiting_pods_are_the_running_message():
    ending = core.conclude(total=2, done=0, aborted=None, in_flight=2, waiting=("p: Unschedulable", "q: x"),
                           queued=1, queue="lq", requeue=2.0)  # fmt: skip
    assert ending == Continue("2 grader pod(s) not running yet: p: Unschedulable", 2, 2.0)


def test_counters_alone_wait_for_the_status_interval_a_phase_change_does_not():
    old = {"phase": "Running", "message": "", "done": 1, "startTime": "s"}
    old["conditions"] = run_conditions(None, "Running", "Grading", "Running", 1, "t")
    counters = {"observedGeneration": 1, "phase": "Running", "message": "", "done": 2}
    deferred = core.status_write(old, counters, reason="Grading", now=NOW, since_write=0.5, interval=2.0)
    assert deferred.patch == {} and deferred.wait == pytest.approx(1.5)
    assert core.status_write(old, counters, reason="Grading", now=NOW, since_write=3.0, interval=2.0).patch == {
        "observedGeneration": 1, "done": 2}  # fmt: skip
    forced = core.status_write(old, counters, reason="Grading", now=NOW, force=True, since_write=0.5, interval=2.0)
    assert forced.patch["done"] == 2
    message = {**counters, "message": "1 grader pod(s) not running yet: p"}
    assert core.status_write(old, message, reason="Grading", now=NOW, since_write=0.5, interval=2.0).patch
    same = {"observedGeneration": 1, "phase": "Running", "message": "", "done": 1}
    assert core.status_write({**old, "observedGeneration": 1}, same, reason="Grading", now=NOW).patch == {}


def test_a_requeue_opens_the_run_again_and_clears_its_completion():
    run = observe_run({"metadata": {"name": "r", "namespace": "ns", "uid": "u", "generation": 3},
                       "spec": {"requeue": 2, "manifestDigest": "d", "payload": {"configMaps": ["r-payload-0"]}},
                       "status": {"phase": "Succeeded", "requeued": 1, "completionTime": "c"}})  # fmt: skip
    assert run.requeue > run.requeued and run.payload_maps == ("r-payload-0",) and run.generation == 3
    change = core.requeue_change(run, dropped=4, now=NOW)
    assert change["phase"] == "Running" and change["requeued"] == 2 and change["completionTime"] is None
    assert "4 infra error(s)" in change["message"] and is_true(change["conditions"], "Running")
    assert change["conditions"][0]["observedGeneration"] == 3


def test_a_payload_not_there_waits_and_an_invalid_one_is_refused_for_good():
    waiting = core.refusal("waiting for payload: configmaps r-payload-0 not found")
    assert (waiting.phase, waiting.reason, waiting.requeue, waiting.warn) == (
        "Pending",
        "WaitingForPayload",
        5.0,
        False,
    )
    refused = core.refusal("invalid payload: digest mismatch")
    assert (refused.phase, refused.reason, refused.requeue, refused.warn) == ("Failed", "InvalidPayload", None, True)
    status = core.status_write({}, {"observedGeneration": 1, "phase": "Failed", "message": refused.message},
                               reason=refused.reason, now=NOW, force=True)  # fmt: skip
    assert not is_true(status.patch["conditions"], "Ready") and is_true(status.patch["conditions"], "Failed")


def test_a_run_read_from_hostile_shapes():
    run = observe_run({"metadata": {"name": "r"}, "spec": {"maxInFlight": "x", "infraRetries": 0, "cache": False},
                       "status": {"conditions": ["junk", {"type": "Ready"}]}})  # fmt: skip
    assert run.max_in_flight is None and run.infra_retries == 0 and run.cache is False and run.payload_maps == ()
    assert run.conditions == ({"type": "Ready"},) and run.phase == "" and run.generation == 1
    assert run.controller == "" and observe_run({"status": {"controller": "b"}}).controller == "b"
    assert observe_payload_chunk({"immutable": "true", "data": None}) == PayloadChunk(False, {})
    assert observe_payload_chunk({"immutable": True, "data": {"k": "v"}}) == PayloadChunk(True, {"k": "v"})


# ---- the watches ----------------------------------------------------------------------------------------
class _Events(list):
    kind = type("K", (), {"plural": "jobs"})()
    namespace = "ns"


def test_a_handler_that_raises_is_logged_and_the_watch_goes_on(caplog):
    events = _Events([WatchEvent("ADDED", {"metadata": {"name": "bad"}}), WatchEvent("ADDED", {"metadata": {}})])
    seen: list[str] = []

    def handler(event: WatchEvent) -> None:
        if event.object["metadata"].get("name") == "bad":
            raise KeyError("status")
        seen.append("next")

    with caplog.at_level(logging.ERROR):
        Controller._follow(None, events, handler)  # type: ignore[arg-type]
    assert seen == ["next"] and "handling ADDED bad failed; the watch goes on" in caplog.text


# ---- the watch-fed stores a pass reads ------------------------------------------------------------------
def test_a_store_follows_its_watch_and_the_writes_of_this_process():
    informers = Informers()
    jobs, pods = informers.serve("ns")
    assert informers.synced("ns") is None  # before its first list: the pass LISTs
    a1, b1 = job("a"), job("b")
    jobs.replace([a1, b1])
    pods.replace([])
    assert informers.synced("ns") == (jobs, pods)
    labels = {LABEL_ITEM: "h-a"}
    assert jobs.select(labels) == [a1] and len(jobs.select({})) == 2
    done = job("a", 1, "Complete")
    jobs.apply(WatchEvent("MODIFIED", done))
    jobs.apply(WatchEvent("LISTED", a1))  # a relist's objects came with `replace`
    assert jobs.select(labels) == [done]
    jobs.assume(job("a"))  # created here, but the watch has the API server's copy: kept
    assert jobs.select(labels) == [done]
    jobs.assume(job("c"))  # created here, not in the watch yet: counted from now on
    assert [o["metadata"]["name"] for o in jobs.select({})] == ["run-a-a1", "run-b-a1", "run-c-a1"]
    jobs.forget("run-b-a1")
    jobs.apply(WatchEvent("DELETED", done))
    assert [o["metadata"]["name"] for o in jobs.select({})] == ["run-c-a1"]
    jobs.replace([b1])  # a relist (after 410 Gone) is the whole truth again
    assert jobs.select({}) == [b1]
    informers.drop("ns")
    assert informers.synced("ns") is None


def uid(obj: dict[str, Any], value: str) -> dict[str, Any]:
    return {**obj, "metadata": {**obj["metadata"], "uid": value}}


def test_a_job_this_process_deleted_never_comes_back_from_a_late_event_but_its_successor_does():
    clock = [0.0]
    jobs = Informers().serve("ns")[0]
    jobs.clock = lambda: clock[0]
    old = uid(job("a", 1, "Failed"), "u1")
    jobs.replace([old])
    jobs.forget("run-a-a1")  # a requeue deleted it: its item is graded again
    jobs.apply(WatchEvent("MODIFIED", old))  # the Job controller's last update, sent before the deletion
    assert jobs.select({}) == []
    jobs.replace([old])  # a relist while its deletion runs
    assert jobs.select({}) == []
    fresh = uid(job("a"), "u2")  # the same name, created again
    jobs.assume(job("a"))
    jobs.apply(WatchEvent("DELETED", old))  # the old one's end never removes the new one
    assert jobs.select({}) == [job("a")]
    jobs.apply(WatchEvent("ADDED", fresh))
    assert jobs.select({}) == [fresh]


def test_a_created_job_the_watch_never_brings_is_dropped_after_a_while():
    clock = [0.0]
    jobs = Informers().serve("ns")[0]
    jobs.clock = lambda: clock[0]
    jobs.replace([])
    jobs.assume(job("a"))
    clock[0] = 30.0
    assert len(jobs.select({})) == 1  # counted against the in-flight bound while the watch lags
    clock[0] = 61.0
    assert jobs.select({}) == []
