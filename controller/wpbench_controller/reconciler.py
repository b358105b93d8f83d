"""Level-triggered reconciliation of one WPBenchRun: observe the cluster, act, write status.

Every pass starts from what the cluster says (the run, its Jobs and pods, its result shards), so a
pass can be repeated or interrupted anywhere without losing or duplicating a verdict:

1. collect finished attempts (one Job each): read the facts, decide (`outcome.decide_outcome`); an
   Infra decision with retries left starts the next attempt's Job, any other ends the item
   (`steps.score_item` and `steps.judge_record`: the same steps as a local run);
2. store those records in the run's result ConfigMaps (one write per batch);
3. only then delete the collected Jobs: one `deletecollection` by item label for every item that
   ended (its Jobs, every attempt, go at once), single deletes only for attempts a retry replaced;
4. start Jobs for items that have neither a result nor a Job, up to the run's in-flight bound, at
   most `creates_per_pass` per pass, so runs take turns on the work queue, and while fewer than
   `max_starting` of the run's Jobs wait for a pod that runs: the platform's queues (Job controller,
   scheduler) then stay short, so another run's Jobs do not wait behind a big run's backlog (model
   items first get their candidate from the generation pool, off this worker);
5. write the status when it changed (counters at most every `status_interval` seconds), saying why
   graders wait when their pods cannot run.

What this process keeps in memory is a cache of cluster state, rebuilt after a restart: the run's
manifest header and tests, its item ids and where each lives (items are read from their payload
ConfigMap when needed, a few chunks at a time: `payload.PayloadIndex`), and a small tally per result.
Pod logs of a pass are read concurrently (`log_readers`).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any

from wpbench_controller.collector import LogReads, finished_attempt_facts, record_without_pod
from wpbench_controller.conditions import Recorder, lifecycle_events, run_conditions, summarise
from wpbench_controller.events import IGNORED, REFUSED, Events
from wpbench_controller.generation import Generated, GenerationPool, GenerationUnavailable
from wpbench_controller.verdicts import ImageProbe, RunVerdicts, pod_image_id
from wpbench_k8s.cache import CACHED_MODES
from wpbench_k8s.errors import InputError
from wpbench_k8s.kube import crd
from wpbench_k8s.kube.client import CONFIG_MAPS, JOBS, NETWORK_POLICIES, PODS, RUNS, Kube, KubeError, NotFound, to_dict
from wpbench_k8s.kube.facts import job_finished, newest, status_facts, waiting_reason
from wpbench_k8s.kube.names import (
    ANNOTATION_ITEM_ID,
    COMPONENT_GENERATED,
    COMPONENT_GRADER,
    COMPONENT_VERDICTS,
    LABEL_ATTEMPT,
    LABEL_ITEM,
    run_selector,
)
from wpbench_k8s.kube.objects import (
    DEFAULT_INFRA_RETRIES,
    DEFAULT_START_SECONDS,
    RunSettings,
    TaskSource,
    item_job,
    network_policy,
    owner_reference,
)
from wpbench_k8s.kube.payload import (
    SUITE_KEY,
    PayloadError,
    PayloadIndex,
    index_payload,
    payload_name,
    task_data_key,
)
from wpbench_k8s.kube.placement import Placement, parse_placement
from wpbench_k8s.kube.results import ResultStore, Shards, listed_shards
from wpbench_k8s.manifest import Candidate, ManifestItem
from wpbench_k8s.outcome import Infra, decide_outcome
from wpbench_k8s.pipeline import judge_for
from wpbench_k8s.records import Record, Usage
from wpbench_k8s.scoring import NotGraded, build_record
from wpbench_k8s.steps import judge_record, score_item
from wpbench_k8s.verified import SuiteCheck, SuiteError, check_items, check_payload_suite

log = logging.getLogger(__name__)


def _generated_from_json(item: ManifestItem, stored: str) -> Generated:
    doc = json.loads(stored)
    candidate = Candidate.model_validate(doc["candidate"])
    filled = item.with_candidate(candidate)
    usage = Usage.model_validate(doc["usage"]) if doc.get("usage") else None
    return Generated(item=filled, usage=usage, answer=doc.get("answer"))


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class RunCache:
    """What this controller remembers about one run between passes (all of it rebuildable)."""

    uid: str
    payload: PayloadIndex
    results: ResultStore
    generated: Shards
    verdicts: RunVerdicts
    suite: SuiteCheck
    generated_items: dict[str, tuple[Generated, str]] = field(default_factory=dict)  # id -> (generation, shard)
    policy_ready: bool = False
    last_status_write: float = 0.0
    log_reads: LogReads = field(default_factory=LogReads)
    judge: Any | None = None
    cursor: int = 0  # items before it in payload.order all have a result
    deleting: set[str] = field(default_factory=set)  # item labels whose Jobs a deletecollection is removing


@dataclass
class Options:
    default_max_in_flight: int = 2
    default_infra_retries: int = DEFAULT_INFRA_RETRIES
    image_pull_policy: str = "IfNotPresent"
    status_interval: float = 2.0  # seconds between counter-only status writes
    start_seconds: int = DEFAULT_START_SECONDS  # how long a grader pod may wait to run (Job deadline)
    # Jobs started per pass: about five seconds of the client's write budget, after which the run
    # goes to the back of the work queue so another run's pass comes first.
    creates_per_pass: int = 100
    # Jobs of one run still waiting for their pod to be created, scheduled or started: more would only
    # queue in the Job controller and scheduler, ahead of other runs' Jobs.
    max_starting: int = 40
    log_readers: int = 8  # pod logs read at once
    job_writers: int = 8  # Job creations in flight at once (still paced by the client's write budget)
    # deletecollection requests in flight at once: the API server deletes the objects of one request one
    # after another (--delete-collection-workers, default 1), so a pass does not wait for them
    job_deleters: int = 4
    # The release's defaults for grader pods (chart values grader.queue, grader.placement); a run's spec
    # overrides them (kube/placement.py).
    default_queue: str = ""
    placement: Placement = field(default_factory=Placement)
    # Suites a cluster admin pinned (name -> digest): records of a run grading one say suite_verified.
    trusted_suites: dict[str, str] = field(default_factory=dict)


@dataclass
class Seen:
    """What step 1 found: records to store, Jobs to delete, items still in flight, why pods wait."""

    records: list[Record] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)  # single Jobs to delete (attempts a retry replaced)
    ended: list[str] = field(default_factory=list)  # item labels whose every Job goes
    active: set[str] = field(default_factory=set)
    starting: int = 0  # active Jobs whose pod is not there yet or Pending
    queued: int = 0  # active Jobs suspended: waiting for Kueue to admit them (not in any platform queue yet)
    retried: list[tuple[str, str]] = field(default_factory=list)  # (item, why) of attempts retried this pass
    waiting: list[str] = field(default_factory=list)
    requeue: float | None = None


def _attempt(job: dict[str, Any]) -> int:
    try:
        return int((job["metadata"].get("labels") or {}).get(LABEL_ATTEMPT, "1"))
    except ValueError:
        return 1


def _min(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)


class Reconciler:
    """Drives runs to completion. One instance per controller process; `reconcile` is not reentrant.

    Model calls run in `generations` (a bounded pool); everything else happens on the caller's thread.
    """

    def __init__(self, kube: Kube, options: Options | None = None, generations: GenerationPool | None = None) -> None:
        self.kube = kube
        self.options = options or Options()
        self.generations = generations or GenerationPool(4)
        self.cache: dict[tuple[str, str], RunCache] = {}
        self.warnings = Events(kube)  # planted objects and refused runs, said once per controller life
        self.log_pool = ThreadPoolExecutor(self.options.log_readers, thread_name_prefix="log")
        self.write_pool = ThreadPoolExecutor(self.options.job_writers, thread_name_prefix="create")
        self.delete_pool = ThreadPoolExecutor(self.options.job_deleters, thread_name_prefix="delete")
        self.events = Recorder(kube)

    # ---- entry point ----------------------------------------------------------------------
    def reconcile(self, namespace: str, name: str) -> float | None:
        """One pass over one run. Returns seconds after which to look again (None: wait for events)."""
        try:
            run = self.kube.get(RUNS, namespace, name)
        except NotFound:
            self._forget(namespace, name)
            return None
        if run["metadata"].get("deletionTimestamp"):
            return None
        status = run.get("status") or {}
        asked = int(run["spec"].get("requeue") or 0)
        if asked > int(status.get("requeued") or 0):
            status = self._requeue(namespace, name, run, asked)
        if status.get("phase") in crd.TERMINAL_PHASES:
            self._forget(namespace, name)
            self._delete_leftover_jobs(namespace, name, run)
            return None
        cache = self._cache(namespace, name, run)
        if isinstance(cache, str):
            phase = "Failed" if cache.startswith("invalid") else "Pending"
            reason = "InvalidPayload" if phase == "Failed" else "WaitingForPayload"
            if phase == "Failed":
                self.warnings.warn(namespace, name, run["metadata"]["uid"], REFUSED, cache)
            self._write_status(run, None, {"phase": phase, "message": cache}, force=True, reason=reason)
            return 5.0 if phase == "Pending" else None
        return self._pass(namespace, name, run, cache)

    def _requeue(self, namespace: str, name: str, run: dict[str, Any], asked: int) -> dict[str, Any]:
        """`wpbench-k8s requeue`: open the run again. Its infra_error records are dropped; items without a
        record (those, and any a cancel left) are then graded as in any pass. Repeatable after a crash."""
        self._forget(namespace, name)
        self._delete_leftover_jobs(namespace, name, run)
        uid = run["metadata"]["uid"]
        dropped = ResultStore(self.kube, namespace, name, uid, listed_shards(run)).reopen()
        message = f"requeued: {dropped} infra error(s) and any item never graded go to graders again"
        change: dict[str, Any] = {"phase": "Running", "message": message, "requeued": asked, "completionTime": None}
        generation = int(run["metadata"].get("generation") or 1)
        old = (run.get("status") or {}).get("conditions")
        change["conditions"] = run_conditions(old, "Running", "Requeued", message, generation, now_iso())
        self.kube.patch(RUNS, namespace, name, {"status": change}, subresource="status")
        log.info("run %s/%s: %s", namespace, name, message)
        status = {k: v for k, v in {**(run.get("status") or {}), **change}.items() if v is not None}
        run["status"] = status
        return status

    def _forget(self, namespace: str, name: str) -> None:
        cache = self.cache.pop((namespace, name), None)
        if cache is not None:
            self.generations.forget_run(cache.uid)

    # ---- state ----------------------------------------------------------------------------
    def _cache(self, namespace: str, name: str, run: dict[str, Any]) -> RunCache | str:
        uid = run["metadata"]["uid"]
        cached = self.cache.get((namespace, name))
        if cached is not None and cached.uid == uid:
            return cached
        maps: list[str] = run["spec"]["payload"]["configMaps"]
        try:
            parse_placement(run["spec"].get("placement"), "spec.placement")
        except ValueError as exc:
            return f"invalid {exc}"
        digest: str = run["spec"]["manifestDigest"]
        accepted = (run.get("status") or {}).get("manifestDigest")
        if accepted and accepted != digest:
            return f"invalid run: spec.manifestDigest {digest} is not the {accepted} the controller accepted"
        if maps != [payload_name(name, n) for n in range(len(maps))]:  # grader pods mount these names
            return (
                f"invalid payload: spec.payload.configMaps must be {name}-payload-0, -1, ... in order, not {maps[:3]}"
            )
        head: dict[str, str] = {}

        def read_chunk(n: int) -> dict[str, str]:
            if n >= len(maps):
                raise PayloadError(f"the run lists {len(maps)} payload ConfigMaps, the index needs more")
            cm = self.kube.get(CONFIG_MAPS, namespace, maps[n])
            # Immutable: what the controller checked below is what every grader pod mounts later.
            if cm.get("immutable") is not True:
                raise PayloadError(f"ConfigMap {maps[n]} is not immutable (its content could change after the check)")
            data: dict[str, str] = cm.get("data") or {}
            if n == 0:
                head.update(data)
            return data

        try:
            payload = index_payload(read_chunk, digest)
            suite = self._check_suite(run, payload, head.get(SUITE_KEY))
        except NotFound as exc:
            return f"waiting for payload: {exc.message or 'a ConfigMap is not there yet'}"
        except (PayloadError, ValueError) as exc:
            return f"invalid payload: {exc}"
        except SuiteError as exc:
            return f"invalid suite: {exc}"
        announce = self._announcer(namespace, name)
        listed = partial(listed_shards, run)
        stamp = {"suite_digest": suite.digest, "suite_verified": suite.verified}
        results = ResultStore(self.kube, namespace, name, uid, listed(), announce("resultConfigMaps"), stamp)
        results.load()
        generated = Shards(self.kube, namespace, name, uid, COMPONENT_GENERATED, listed=listed("generatedConfigMaps"),
                           announce=announce("generatedConfigMaps"))  # fmt: skip
        enabled = payload.manifest.mode in CACHED_MODES and run["spec"].get("cache", True) is not False
        index = Shards(self.kube, namespace, name, uid, COMPONENT_VERDICTS, listed=listed("verdictConfigMaps"),
                       announce=announce("verdictConfigMaps"))  # fmt: skip
        if enabled:
            index.load()  # this run's own entries: where its next ones go after a restart
        image_id = str((run.get("status") or {}).get("graderImageID") or "")

        def report(message: str, claimed: dict[str, Any] | None) -> None:  # on this run and on the run it claims
            self.warnings.warn(namespace, name, uid, IGNORED, message)
            if claimed is not None and claimed["metadata"]["uid"] != uid:
                claimed_name, claimed_uid = claimed["metadata"]["name"], claimed["metadata"]["uid"]
                self.warnings.warn(namespace, claimed_name, claimed_uid, IGNORED, message)

        verdicts = RunVerdicts(self.kube, namespace, payload.manifest, index, enabled, image_id, payload.items,
                               report=report, stamp=results.stamp)  # fmt: skip
        cache = RunCache(uid, payload, results, generated, verdicts, suite, judge=judge_for(payload.manifest))
        self._load_generated(cache)
        for shards in (results.shards, generated, index):
            for ignored in shards.ignored:
                self.warnings.warn(namespace, name, uid, IGNORED, f"ConfigMap {ignored} claims to be this run's "
                                 f"{shards.component} but the controller never listed it: ignored")  # fmt: skip
        self.cache[(namespace, name)] = cache
        log.info("run %s/%s: %d items, %d already done", namespace, name, payload.total, len(results.tallies))
        return cache

    def _check_suite(self, run: dict[str, Any], payload: PayloadIndex, raw_table: str | None) -> SuiteCheck:
        """The suite the payload grades, recomputed (`wpbench_k8s.verified`). Raises SuiteError."""
        declared = str(run["spec"].get("suiteDigest") or "")
        check = check_payload_suite(declared, raw_table, payload.manifest, self.options.trusted_suites)
        check_items(payload.manifest, payload.items())
        return check

    def _announcer(self, namespace: str, name: str) -> Callable[[str], Callable[[list[str]], None]]:
        """For a status field: a function writing the run's shard list there (before a shard is created)."""

        def field_writer(status_field: str) -> Callable[[list[str]], None]:
            def announce(names: list[str]) -> None:
                self.kube.patch(RUNS, namespace, name, {"status": {status_field: names}}, subresource="status")

            return announce

        return field_writer

    def _load_generated(self, cache: RunCache) -> None:
        data = cache.generated.load()
        for item_id, key in cache.payload.keys.items():
            stored = data.get(f"generated.{key}.json")
            if stored is not None:
                generated = _generated_from_json(cache.payload.item(item_id), stored)
                cache.generated_items[item_id] = (generated, cache.generated.where.get(task_data_key(key), ""))

    def settings(self, namespace: str, name: str, run: dict[str, Any]) -> RunSettings:
        spec = run["spec"]
        return RunSettings(
            name=name,
            namespace=namespace,
            max_in_flight=int(spec.get("maxInFlight") or self.options.default_max_in_flight),
            infra_retries=int(spec.get("infraRetries", self.options.default_infra_retries)),
            image_pull_policy=self.options.image_pull_policy,
            start_seconds=self.options.start_seconds,
            queue=str(spec.get("queue") or self.options.default_queue),
            workload_priority=str(spec.get("workloadPriorityClass") or ""),
            placement=parse_placement(spec.get("placement"), "spec.placement").over(self.options.placement),
        )

    # ---- one pass -------------------------------------------------------------------------
    def _pass(self, namespace: str, name: str, run: dict[str, Any], cache: RunCache) -> float | None:
        settings = self.settings(namespace, name, run)
        manifest = cache.payload.manifest
        owner = owner_reference(name, cache.uid)
        selector = run_selector(name, COMPONENT_GRADER)
        jobs = self.kube.items(JOBS, namespace, selector=selector)
        pods = self.kube.items(PODS, namespace, selector=selector) if jobs else []

        # 1. collect
        seen = self._collect(namespace, cache, settings, owner, jobs, pods)

        # 2. store, 3. then delete
        if seen.records:
            cache.results.append(seen.records)
            cache.verdicts.flush()  # index entries only for records already stored
        self._pass_events(run, seen)
        self._delete_ended(namespace, selector, seen.ended, cache.deleting)
        for job_name in seen.finished:
            self.kube.delete(JOBS, namespace, job_name)

        if run["spec"].get("cancel"):
            if jobs:
                self.kube.delete_collection(JOBS, namespace, selector=selector)
            # Model calls already paid for are stored (answers become records); none starts any more.
            running = self.generations.stop_run(cache.uid)
            self._store_finished_generations(namespace, name, cache)
            if running:
                message = f"cancelling: waiting for {running} model call(s) to return"
                self._write_status(run, cache, {"phase": "Running", "message": message, "inFlight": running})
                return None  # the pool requeues the run as each call returns
            return self._finish(run, cache, "Cancelled", "cancelled by request", in_flight=0, reason="Cancelled")

        # 4. schedule
        aborted = cache.results.first_failure if not manifest.continue_on_error else None
        if not cache.policy_ready:
            self.kube.ensure(NETWORK_POLICIES, namespace, to_dict(network_policy(settings, owner)))
            cache.policy_ready = True
        started = 0
        if aborted is None and cache.verdicts.reuse is None:
            if not cache.verdicts.prepare(cache.results, lambda: self._probe(cache, settings, owner)):
                message = "resolving the grader image to the id every grader pod runs (image-probe pod)"
                wait = self._write_status(run, cache, {"phase": "Running", "message": message,
                                                       "inFlight": len(seen.active)})  # fmt: skip
                return _min(1.0, wait)
            reused = cache.verdicts.records(cache.results, cache.judge)
            if reused:
                cache.results.append(reused)
                cache.verdicts.flush()
        if aborted is None:
            started, requeue_s = self._schedule(namespace, cache, settings, owner, seen.active, seen.starting)
            seen.requeue = _min(seen.requeue, requeue_s)
        in_flight = len(seen.active) + started

        # 5. status
        total = cache.payload.total
        done = len(cache.results.tallies)
        if done >= total:
            return self._finish(run, cache, "Succeeded", f"{done} items graded", in_flight=0, reason="AllGraded")
        if aborted is not None and in_flight == 0:
            message = f"stopped at the first error (continue_on_error off): {aborted}"
            return self._finish(run, cache, "Failed", message, 0, reason="StoppedAtFirstError")
        message = ""
        if seen.waiting:
            message = f"{len(seen.waiting)} grader pod(s) not running yet: {seen.waiting[0]}"
        elif seen.queued:
            message = f"{seen.queued} grader Job(s) queued in LocalQueue {settings.queue} (Kueue admits them)"
        wait = self._write_status(run, cache, {"phase": "Running", "message": message, "inFlight": in_flight})
        return _min(seen.requeue, wait)

    def _collect(
        self,
        namespace: str,
        cache: RunCache,
        settings: RunSettings,
        owner: Any,
        jobs: list[dict[str, Any]],
        pods: list[dict[str, Any]],
    ) -> Seen:
        """Step 1: every item's newest attempt, decided; older attempts are garbage."""
        seen = Seen()
        pods_of: dict[tuple[str, int], list[dict[str, Any]]] = {}
        for pod in pods:
            labels = pod["metadata"].get("labels") or {}
            pods_of.setdefault((labels.get(LABEL_ITEM, ""), _attempt(pod)), []).append(pod)
        by_item: dict[str, list[dict[str, Any]]] = {}
        for job in jobs:
            item_id = (job["metadata"].get("annotations") or {}).get(ANNOTATION_ITEM_ID, "")
            by_item.setdefault(item_id, []).append(job)
        finished: list[tuple[str, dict[str, Any], dict[str, Any] | None]] = []  # (item, latest Job, its pod)
        for item_id, item_jobs in by_item.items():
            item_jobs.sort(key=_attempt)
            latest = item_jobs[-1]
            item_label = (latest["metadata"].get("labels") or {}).get(LABEL_ITEM, "")
            if item_id in cache.results or item_id not in cache.payload.keys:
                seen.ended.append(item_label)  # stored already (a pass died before deleting)
                continue
            attempt_pod = newest(pods_of.get((item_label, _attempt(latest)), []))
            if not job_finished(latest):
                seen.finished.extend(j["metadata"]["name"] for j in item_jobs[:-1])
                seen.active.add(item_id)
                if (latest.get("spec") or {}).get("suspend"):  # in Kueue's queue (or preempted back into it)
                    seen.queued += 1
                elif attempt_pod is None or (attempt_pod.get("status") or {}).get("phase", "Pending") == "Pending":
                    seen.starting += 1
                if attempt_pod is not None and waiting_reason(attempt_pod):
                    seen.waiting.append(f"{attempt_pod['metadata']['name']}: {waiting_reason(attempt_pod)}")
                continue
            finished.append((item_id, latest, attempt_pod))
        # Logs of every finished attempt whose status alone does not decide, read at once.
        to_read = [
            pod["metadata"]["name"]
            for item_id, job, pod in finished
            if pod is not None and status_facts(job, pod, test_id=None) is None
        ]
        if len(to_read) > 1:
            cache.log_reads.prefetch(self.kube, namespace, to_read, self.log_pool)
        for item_id, latest, attempt_pod in finished:
            attempt = _attempt(latest)
            item_jobs = by_item[item_id]
            item, usage = self._pod_item(cache, item_id)
            facts = finished_attempt_facts(self.kube, namespace, latest, attempt_pod, item.test_id, cache.log_reads)
            if facts is None:  # the log did not answer this time; a bounded number of passes try again
                seen.active.add(item_id)
                seen.requeue = _min(seen.requeue, 2.0)
                continue
            decision = decide_outcome(facts)
            if isinstance(decision, Infra) and attempt <= settings.infra_retries:
                log.info("%s attempt %d: %s; starting attempt %d", item_id, attempt, decision.reason, attempt + 1)
                retry = item_job(cache.payload.manifest, item, settings, self._task_source(cache, settings, item),
                                 owner, attempt=attempt + 1, previous_reason=decision.reason)  # fmt: skip
                try:
                    self.kube.ensure(JOBS, namespace, to_dict(retry))
                except KubeError as exc:  # quota, admission: keep this attempt and try again later
                    log.warning("%s: cannot start attempt %d: %s", item_id, attempt + 1, exc)
                    seen.active.add(item_id)
                    seen.requeue = _min(seen.requeue, 10.0)
                    continue
                seen.active.add(item_id)
                seen.retried.append((item_id, decision.reason))
                seen.finished.extend(j["metadata"]["name"] for j in item_jobs)  # the new attempt stays
            else:
                manifest = cache.payload.manifest
                record = score_item(manifest, item, (decision, attempt - 1), usage=usage)
                record = judge_record(cache.judge, manifest, item, record)
                seen.records.append(record)
                image_id = pod_image_id(attempt_pod)
                if not isinstance(decision, Infra):  # a verdict a grader decided, never an infra fallback
                    cache.verdicts.note(record, item.task, image_id)
                cache.verdicts.image_id = cache.verdicts.image_id or image_id
                seen.ended.append((latest["metadata"].get("labels") or {}).get(LABEL_ITEM, ""))
        return seen

    def _delete_ended(
        self, namespace: str, selector: str, labels: list[str], deleting: set[str], batch: int = 50
    ) -> None:
        """Every Job of the ended items, one request per `batch` items (a label selector `item in (...)`),
        sent in the background: their records are stored, so nothing waits for the deletion. Items whose
        deletion is under way are left out (their Jobs still show in lists until it ends)."""
        fresh = sorted({label for label in labels if label} - deleting)
        for start in range(0, len(fresh), batch):
            chosen = fresh[start : start + batch]
            deleting.update(chosen)
            self.delete_pool.submit(self._delete_batch, namespace, selector, chosen, deleting)

    def _delete_batch(self, namespace: str, selector: str, labels: list[str], deleting: set[str]) -> None:
        try:
            self.kube.delete_collection(JOBS, namespace, selector=f"{selector},{LABEL_ITEM} in ({','.join(labels)})")
        except KubeError as exc:  # the Jobs stay listed: a later pass sees their items stored and tries again
            log.warning("deleting %d collected Jobs: %s", len(labels), exc)
        finally:
            deleting.difference_update(labels)

    def _store_finished_generations(self, namespace: str, name: str, cache: RunCache) -> None:
        records: list[Record] = []
        for item_id in self.generations.finished(cache.uid):
            outcome = self._generated(namespace, name, cache, cache.payload.item(item_id))
            if isinstance(outcome, Record):
                records.append(outcome)
            elif outcome is not None and not outcome[0].item.needs_grader:
                records.append(record_without_pod(cache.payload.manifest, cache.payload.item(item_id), outcome[0]))
        if records:
            cache.results.append(records)

    def _probe(self, cache: RunCache, settings: RunSettings, owner: Any) -> str | None:
        """The grader image id from an image-probe pod ("" when there is nothing to grade or it cannot run)."""
        manifest = cache.payload.manifest
        item = next((i for i in cache.payload.items() if i.needs_grader and i.task is not None), None)
        if item is None:
            return ""
        probe = ImageProbe(self.kube, settings, owner)
        return probe.image_id(lambda: probe.pod(manifest, item, self._task_source(cache, settings, item)))

    def _task_source(self, cache: RunCache, settings: RunSettings, item: ManifestItem) -> TaskSource:
        key = task_data_key(cache.payload.keys[item.item_id])
        if item.item_id in cache.generated_items:
            return TaskSource(cache.generated_items[item.item_id][1], key)
        return TaskSource(payload_name(settings.name, cache.payload.chunk_of[item.item_id]), key)

    def _pod_item(self, cache: RunCache, item_id: str) -> tuple[ManifestItem, Usage | None]:
        if item_id in cache.generated_items:
            generated, _ = cache.generated_items[item_id]
            return generated.item, generated.usage
        return cache.payload.item(item_id), None

    def _schedule(
        self,
        namespace: str,
        cache: RunCache,
        settings: RunSettings,
        owner: Any,
        active: set[str],
        starting: int = 0,
    ) -> tuple[int, float | None]:
        """Start Jobs up to the in-flight bound; score items that need no pod. Returns (started, requeue).

        A model item takes an in-flight slot while its model call runs in the generation pool; the
        pool requeues the run when the call returns, and this pass stores the candidate first.
        """
        manifest = cache.payload.manifest
        slots = settings.max_in_flight - len(active)
        room = self.options.max_starting - starting  # more would wait in the platform's queues
        creates = min(self.options.creates_per_pass, room)
        started = 0
        no_pod: list[Record] = []
        to_create: list[dict[str, Any]] = []
        order, results = cache.payload.order, cache.results
        while cache.cursor < len(order) and order[cache.cursor] in results:
            cache.cursor += 1
        for position in range(cache.cursor, len(order)):
            if slots <= 0:
                break
            item_id = order[position]
            if item_id in results or item_id in active:
                continue
            if creates <= 0:  # this pass has written its share; the run comes round again
                break
            item = cache.payload.item(item_id)
            generated: Generated | None = None
            if item.candidate is None:
                outcome = self._generated(namespace, settings.name, cache, item)
                if outcome is None:  # the model call runs
                    slots -= 1
                    started += 1
                    continue
                if isinstance(outcome, Record):
                    no_pod.append(outcome)
                    continue
                generated, _ = outcome
                item = generated.item
            if not item.needs_grader:
                original = cache.payload.item(item.item_id)
                no_pod.append(record_without_pod(manifest, original if generated else item, generated))
                continue
            job = item_job(manifest, item, settings, self._task_source(cache, settings, item), owner)
            to_create.append(to_dict(job))
            slots -= 1
            creates -= 1
        created, failed = self._create_jobs(namespace, to_create)
        started += created
        if no_pod:
            cache.results.append(no_pod)
        if failed:  # quota, admission: said so; try again later
            return started, 10.0
        if creates <= 0 and room < self.options.creates_per_pass:  # pods start: look again soon
            return started, 1.0
        if creates <= 0 or no_pod:  # this pass has written its share, or more may be schedulable now
            return started, 0.0
        return started, None

    def _create_jobs(self, namespace: str, bodies: list[dict[str, Any]]) -> tuple[int, int]:
        """Create Jobs concurrently (each request waits on the API server, not on this process); the
        client's write budget still paces them. Returns (created or already there, failed)."""

        def create(body: dict[str, Any]) -> bool:
            try:
                self.kube.ensure(JOBS, namespace, body)
            except KubeError as exc:
                log.warning("cannot create Job %s: %s", body["metadata"]["name"], exc)
                return False
            return True

        done = list(self.write_pool.map(create, bodies))
        return sum(done), len(done) - sum(done)

    def _generated(
        self, namespace: str, name: str, cache: RunCache, item: ManifestItem
    ) -> tuple[Generated, str] | Record | None:
        """Model items: the stored candidate; else the pool's finished call, stored before any Job uses it;
        else None once the call is started (or still running)."""
        if item.item_id in cache.generated_items:
            return cache.generated_items[item.item_id]
        manifest = cache.payload.manifest
        outcome = self.generations.take(cache.uid, item.item_id)
        if outcome is None:
            self.generations.start((namespace, name), cache.uid, manifest, item)
            return None
        if isinstance(outcome, (GenerationUnavailable, InputError)):
            return build_record(manifest, item, NotGraded(f"generation: {outcome}"))
        if isinstance(outcome, BaseException):
            return build_record(manifest, item, NotGraded(f"generation failed: {type(outcome).__name__}: {outcome}"))
        generated = outcome
        if generated.error or generated.item.candidate is None:
            reason = generated.error or "no candidate"
            return build_record(manifest, item, NotGraded(reason), usage=generated.usage)
        candidate = generated.item.candidate
        generated.item = generated.item.with_candidate(candidate)
        key = cache.payload.keys[item.item_id]
        doc = {
            "candidate": candidate.model_dump(mode="json"),
            "usage": generated.usage.model_dump(mode="json") if generated.usage else None,
            "answer": generated.answer,
        }
        entries = {f"generated.{key}.json": json.dumps(doc)}
        if generated.item.task is not None:
            entries[task_data_key(key)] = generated.item.task.model_dump_json()
        _, where = cache.generated.put(entries)
        cache.generated_items[item.item_id] = (generated, where.get(task_data_key(key), ""))
        return cache.generated_items[item.item_id]

    # ---- writes ---------------------------------------------------------------------------
    def _delete_leftover_jobs(self, namespace: str, name: str, run: dict[str, Any]) -> None:
        selector = run_selector(name, COMPONENT_GRADER)
        if not self.kube.items(JOBS, namespace, selector=selector):
            return
        # A finished run keeps nothing running; no Job of it is needed any more.
        self.kube.delete_collection(JOBS, namespace, selector=selector)

    def _pass_events(self, run: dict[str, Any], seen: Seen) -> None:
        """One Event per pass for the attempts it retried and one for the items it ended as infra_error."""
        if seen.retried:
            text = summarise("grader attempt(s) failed on infrastructure and were retried", seen.retried)
            self.events.emit(run, "Normal", "Retried", text, now_iso())
        infra = [(r.item_id, r.error or "") for r in seen.records if r.error_type == "infra_error"]
        if infra:
            text = summarise("item(s) ended as infra_error (excluded from the score; `requeue` grades them)", infra)
            self.events.emit(run, "Warning", "InfraError", text, now_iso())

    def _finish(
        self, run: dict[str, Any], cache: RunCache, phase: str, message: str, in_flight: int, *, reason: str
    ) -> float | None:
        self._write_status(
            run,
            cache,
            {"phase": phase, "message": message, "inFlight": in_flight, "completionTime": now_iso()},
            force=True,
            reason=reason,
        )
        self._forget(run["metadata"]["namespace"], run["metadata"]["name"])
        return None

    def _write_status(
        self,
        run: dict[str, Any],
        cache: RunCache | None,
        fields: dict[str, Any],
        *,
        force: bool = False,
        reason: str = "Grading",
    ) -> float | None:
        """Merge-patch the status subresource when it changed; the conditions follow the phase, and a change
        of them that people care about is an Event. Returns a requeue delay when deferred."""
        old = run.get("status") or {}
        new: dict[str, Any] = {"observedGeneration": run["metadata"].get("generation", 1)}
        if cache is not None:
            total = cache.payload.total
            new.update(cache.results.summary())
            new.update(cache.verdicts.index_summary())
            if cache.generated.shards:
                new["generatedConfigMaps"] = [n for n, _ in cache.generated.shards]
            new.update(manifestDigest=run["spec"]["manifestDigest"], suite=cache.suite.suite,
                       suiteDigest=cache.suite.digest, suiteVerified=cache.suite.verified)  # fmt: skip
            ignored = [n for s in (cache.results.shards, cache.generated, cache.verdicts.index) for n in s.ignored]
            if ignored:
                new["ignored"] = sorted(set(ignored) | set(old.get("ignored") or []))
            if cache.verdicts.image_id:
                new["graderImageID"] = cache.verdicts.image_id
            new["total"] = total
            new["progress"] = f"{new['done']}/{total}"
        new.update(fields)
        new.setdefault("startTime", old.get("startTime") or now_iso())
        if old.get("completionTime") and "completionTime" in new:
            new["completionTime"] = old["completionTime"]
        phase = str(new.get("phase") or old.get("phase") or "Pending")
        message = str(new.get("message", old.get("message", "")) or "")
        new["conditions"] = run_conditions(old.get("conditions"), phase, reason, message or phase,
                                           int(new["observedGeneration"] or 1), now_iso())  # fmt: skip
        changed = {k: v for k, v in new.items() if old.get(k) != v}
        if not changed:
            return None
        counters_only = not ({"phase", "message", "total"} & set(changed))
        if counters_only and not force and cache is not None:
            wait = self.options.status_interval - (time.monotonic() - cache.last_status_write)
            if wait > 0:
                return wait
        self.kube.patch(
            RUNS, run["metadata"]["namespace"], run["metadata"]["name"], {"status": changed}, subresource="status"
        )
        if "conditions" in changed:
            before = str(old.get("phase", ""))
            for kind, why in lifecycle_events(old.get("conditions"), new["conditions"], before, phase):
                self.events.emit(run, kind, why, message or phase, now_iso())
        run["status"] = {**old, **changed}
        if cache is not None:
            cache.last_status_write = time.monotonic()
        return None
