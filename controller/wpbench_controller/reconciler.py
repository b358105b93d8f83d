"""Level-triggered reconciliation of one WPBenchRun: observe the cluster, decide, act, write status.

This is the shell around the pure decisions of `core.py`: it reads (through `wpbench_k8s.kube`), builds
the typed observation (`observed.py`), asks the core, and carries out what it decided, in an order that
lets a pass be repeated or interrupted anywhere without losing or duplicating a verdict:

1. collect finished attempts (one Job each): read their facts (status, log, events), let the core decide
   (`core.collect` over `outcome.decide_outcome`); an Infra decision with retries left starts the next
   attempt's Job first, any other ends the item (`steps.score_item` and `steps.judge_record`: the same
   steps as a local run);
2. store those records in the run's result ConfigMaps (one write per batch);
3. only then delete the collected Jobs: one `deletecollection` by item label for every item that ended
   (its Jobs, every attempt, go at once), single deletes only for attempts a retry replaced;
4. start Jobs for items that have neither a result nor a Job (`core.schedule`), up to the run's in-flight
   bound, at most `creates_per_pass` per pass, so runs take turns on the work queue, and while fewer than
   `max_starting` of the run's Jobs wait for a pod that runs: the platform's queues (Job controller,
   scheduler) then stay short, so another run's Jobs do not wait behind a big run's backlog (model items
   first get their candidate from the generation pool, off this worker);
5. write the status when it changed (`core.conclude`, `core.status_write`: counters at most every
   `status_interval` seconds), saying why graders wait when their pods cannot run.

What this process keeps in memory is a cache of cluster state, rebuilt after a restart: the run's
manifest header and tests, its item ids and where each lives (items are read from their payload
ConfigMap when needed, a few chunks at a time: `payload.PayloadIndex`), and a small tally per result.
Pod logs of a pass are read concurrently (`log_readers`). A write refused because this replica's
leadership lapsed (`Fenced`) is never caught here: it ends the pass.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any

import wpbench_controller.core as core
from wpbench_controller.collector import LogReads, finished_attempt_facts, log_needed, record_without_pod
from wpbench_controller.conditions import Recorder
from wpbench_controller.core import Collection, Ending, Finish, Pending
from wpbench_controller.events import IGNORED, REFUSED, Events
from wpbench_controller.generation import Generated, GenerationPool, GenerationUnavailable
from wpbench_controller.informer import Informers
from wpbench_controller.observed import (
    Observation,
    ObservedJob,
    ObservedRun,
    observe_job,
    observe_jobs,
    observe_payload_chunk,
    observe_run,
)
from wpbench_controller.verdicts import ImageProbe, RunVerdicts
from wpbench_k8s.cache import CACHED_MODES
from wpbench_k8s.errors import InputError
from wpbench_k8s.kube import crd
from wpbench_k8s.kube.client import (
    CONFIG_MAPS,
    JOBS,
    NETWORK_POLICIES,
    PODS,
    RUNS,
    Fenced,
    Kube,
    KubeError,
    NotFound,
    to_dict,
)
from wpbench_k8s.kube.names import (
    COMPONENT_GENERATED,
    COMPONENT_GRADER,
    COMPONENT_VERDICTS,
    LABEL_ITEM,
    pod_selector,
    run_selector,
)
from wpbench_k8s.kube.objects import (
    DEFAULT_INFRA_RETRIES,
    DEFAULT_START_SECONDS,
    RunSettings,
    TaskSource,
    network_policy,
    owner_reference,
    pod_batch,
    unit_job,
    units,
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
from wpbench_k8s.outcome import GraderFacts
from wpbench_k8s.pipeline import judge_for
from wpbench_k8s.records import Record, Usage
from wpbench_k8s.scoring import NotGraded, build_record
from wpbench_k8s.steps import RecordJudge, judge_record, score_item
from wpbench_k8s.verified import SuiteCheck, SuiteError, check_items, check_payload_suite

log = logging.getLogger(__name__)


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class StoredGeneration:
    """A model item's candidate, stored in the run's generated ConfigMaps (`shard`: where its task lives)."""

    generated: Generated
    shard: str


@dataclass(frozen=True)
class CallRunning:
    """A model item whose model call runs in the generation pool (started now or earlier)."""


# A model item as step 4 finds it: its stored candidate, the record of a call that gave none, or a call running.
GenerationState = StoredGeneration | Record | CallRunning


def _generated_from_json(item: ManifestItem, stored: str) -> Generated:
    doc = json.loads(stored)
    candidate = Candidate.model_validate(doc["candidate"])
    filled = item.with_candidate(candidate)
    usage = Usage.model_validate(doc["usage"]) if doc.get("usage") else None
    return Generated(item=filled, usage=usage, answer=doc.get("answer"))


@dataclass
class RunCache:
    """What this controller remembers about one run between passes (all of it rebuildable)."""

    uid: str
    payload: PayloadIndex
    results: ResultStore
    generated: Shards
    verdicts: RunVerdicts
    suite: SuiteCheck
    generated_items: dict[str, StoredGeneration] = field(default_factory=dict)  # item id -> its stored candidate
    policy_ready: bool = False
    last_status_write: float = 0.0
    log_reads: LogReads = field(default_factory=LogReads)
    judge: RecordJudge | None = None
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


class Reconciler:
    """Drives runs to completion. One instance per controller process; `reconcile` is not reentrant.

    Model calls run in `generations` (a bounded pool); everything else happens on the caller's thread.
    With `informers` (the controller's watch-fed stores) a pass reads Jobs and pods from memory once they
    have listed (`informer.py`); without, or before that, it LISTs them.
    """

    def __init__(
        self,
        kube: Kube,
        options: Options | None = None,
        generations: GenerationPool | None = None,
        informers: Informers | None = None,
    ) -> None:
        self.kube = kube
        self.informers = informers
        self.options = options or Options()
        self.generations = generations or GenerationPool(4)
        self.cache: dict[tuple[str, str], RunCache] = {}
        self.warnings = Events(kube)  # planted objects and refused runs, said once per controller life
        self.log_pool = ThreadPoolExecutor(self.options.log_readers, thread_name_prefix="log")
        self.write_pool = ThreadPoolExecutor(self.options.job_writers, thread_name_prefix="create")
        self.delete_pool = ThreadPoolExecutor(self.options.job_deleters, thread_name_prefix="delete")
        self.events = Recorder(kube)

    def shutdown(self) -> None:
        """Stop this reconciler's thread pools (a leadership term ended): queued work is dropped, running
        requests finish on their own (a fenced client refuses their writes)."""
        for pool in (self.log_pool, self.write_pool, self.delete_pool):
            pool.shutdown(wait=False, cancel_futures=True)

    # ---- entry point ----------------------------------------------------------------------
    def reconcile(self, namespace: str, name: str) -> float | None:
        """One pass over one run. Returns seconds after which to look again (None: wait for events)."""
        try:
            run = observe_run(self.kube.get(RUNS, namespace, name))
        except NotFound:
            self._forget(namespace, name)
            return None
        if run.deleting:
            return None
        if run.requeue > run.requeued:
            run = self._requeue(run)
        if run.phase in crd.TERMINAL_PHASES:
            self._forget(namespace, name)
            self._delete_leftover_jobs(namespace, name)
            return None
        cache = self._cache(run)
        if isinstance(cache, str):
            refused = core.refusal(cache)
            if refused.warn:
                self.warnings.warn(namespace, name, run.uid, REFUSED, cache)
            self._write_status(run, None, {"phase": refused.phase, "message": refused.message}, force=True,
                               reason=refused.reason)  # fmt: skip
            return refused.requeue
        return self._pass(run, cache)

    def _requeue(self, run: ObservedRun) -> ObservedRun:
        """`wpbench-k8s requeue`: open the run again. Its infra_error records are dropped; items without a
        record (those, and any a cancel left) are then graded as in any pass. Repeatable after a crash."""
        self._forget(run.namespace, run.name)
        self._delete_leftover_jobs(run.namespace, run.name)
        dropped = ResultStore(self.kube, run.namespace, run.name, run.uid, listed_shards(run.source)).reopen()
        change = core.requeue_change(run, dropped, now_iso())
        self.kube.patch(RUNS, run.namespace, run.name, {"status": change}, subresource="status")
        log.info("run %s/%s: %s", run.namespace, run.name, change["message"])
        status = {k: v for k, v in {**run.status, **change}.items() if v is not None}
        return observe_run({**run.source, "status": status})

    def _forget(self, namespace: str, name: str) -> None:
        cache = self.cache.pop((namespace, name), None)
        if cache is not None:
            self.generations.forget_run(cache.uid)

    # ---- state ----------------------------------------------------------------------------
    def _cache(self, run: ObservedRun) -> RunCache | str:
        namespace, name, uid = run.namespace, run.name, run.uid
        cached = self.cache.get((namespace, name))
        if cached is not None and cached.uid == uid:
            return cached
        maps = list(run.payload_maps)
        try:
            parse_placement(run.placement, "spec.placement")
        except ValueError as exc:
            return f"invalid {exc}"
        digest = run.manifest_digest
        accepted = run.accepted_digest
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
            chunk = observe_payload_chunk(self.kube.get(CONFIG_MAPS, namespace, maps[n]))
            # Immutable: what the controller checked below is what every grader pod mounts later.
            if not chunk.immutable:
                raise PayloadError(f"ConfigMap {maps[n]} is not immutable (its content could change after the check)")
            if n == 0:
                head.update(chunk.data)
            return chunk.data

        try:
            payload = index_payload(read_chunk, digest)
            suite = self._check_suite(run, payload, head.get(SUITE_KEY))
        except NotFound as exc:
            return f"waiting for payload: {exc.message or 'a ConfigMap is not there yet'}"
        except (PayloadError, ValueError) as exc:
            return f"invalid payload: {exc}"
        except SuiteError as exc:
            return f"invalid suite: {exc}"
        if run.candidates_per_pod > 1 and payload.manifest.grader.execution_isolation != "fork_per_test":
            return (f"invalid run: spec.candidatesPerPod {run.candidates_per_pod} needs fast mode; the manifest's "
                    f"execution_isolation is {payload.manifest.grader.execution_isolation}")  # fmt: skip
        announce = self._announcer(namespace, name)
        listed = partial(listed_shards, run.source)
        stamp = {"suite_digest": suite.digest, "suite_verified": suite.verified}
        results = ResultStore(self.kube, namespace, name, uid, listed(), announce("resultConfigMaps"), stamp)
        results.load()
        generated = Shards(self.kube, namespace, name, uid, COMPONENT_GENERATED, listed=listed("generatedConfigMaps"),
                           announce=announce("generatedConfigMaps"))  # fmt: skip
        enabled = payload.manifest.mode in CACHED_MODES and run.cache
        index = Shards(self.kube, namespace, name, uid, COMPONENT_VERDICTS, listed=listed("verdictConfigMaps"),
                       announce=announce("verdictConfigMaps"))  # fmt: skip
        if enabled:
            index.load()  # this run's own entries: where its next ones go after a restart

        def report(message: str, claimed: dict[str, Any] | None) -> None:  # on this run and on the run it claims
            self.warnings.warn(namespace, name, uid, IGNORED, message)
            if claimed is not None:
                other = observe_run(claimed)
                if other.uid != uid:
                    self.warnings.warn(namespace, other.name, other.uid, IGNORED, message)

        verdicts = RunVerdicts(self.kube, namespace, payload.manifest, index, enabled, run.grader_image_id,
                               payload.items, report=report, stamp=results.stamp)  # fmt: skip
        cache = RunCache(uid, payload, results, generated, verdicts, suite, judge=judge_for(payload.manifest))
        self._load_generated(cache)
        for shards in (results.shards, generated, index):
            for ignored in shards.ignored:
                self.warnings.warn(namespace, name, uid, IGNORED, f"ConfigMap {ignored} claims to be this run's "
                                 f"{shards.component} but the controller never listed it: ignored")  # fmt: skip
        self.cache[(namespace, name)] = cache
        log.info("run %s/%s: %d items, %d already done", namespace, name, payload.total, len(results.tallies))
        return cache

    def _check_suite(self, run: ObservedRun, payload: PayloadIndex, raw_table: str | None) -> SuiteCheck:
        """The suite the payload grades, recomputed (`wpbench_k8s.verified`). Raises SuiteError."""
        check = check_payload_suite(run.suite_digest, raw_table, payload.manifest, self.options.trusted_suites)
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
                shard = cache.generated.where.get(task_data_key(key), "")
                cache.generated_items[item_id] = StoredGeneration(generated, shard)

    def settings(self, run: ObservedRun) -> RunSettings:
        options = self.options
        return RunSettings(
            name=run.name,
            namespace=run.namespace,
            max_in_flight=run.max_in_flight or options.default_max_in_flight,
            infra_retries=options.default_infra_retries if run.infra_retries is None else run.infra_retries,
            image_pull_policy=options.image_pull_policy,
            start_seconds=options.start_seconds,
            queue=run.queue or options.default_queue,
            workload_priority=run.workload_priority,
            placement=parse_placement(run.placement, "spec.placement").over(options.placement),
            candidates_per_pod=run.candidates_per_pod,
        )

    # ---- one pass -------------------------------------------------------------------------
    def _pass(self, run: ObservedRun, cache: RunCache) -> float | None:
        namespace, name = run.namespace, run.name
        settings = self.settings(run)
        manifest = cache.payload.manifest
        owner = owner_reference(name, cache.uid)
        selector = run_selector(name, COMPONENT_GRADER)
        jobs, pods, cached = self._read_graders(namespace, name, selector)

        # 1. collect: the facts of the attempts to decide, then the core's decisions
        observation = Observation(observe_jobs(jobs, pods), stored=cache.results, known=cache.payload.keys)
        if cached and core.to_decide(observation):  # a verdict is read from the pods as they are now
            pods = self.kube.items(PODS, namespace, selector=selector)
            observation = Observation(observe_jobs(jobs, pods), stored=cache.results, known=cache.payload.keys)
        observation = dataclasses.replace(observation, facts=self._facts(namespace, cache, core.to_decide(observation)))
        collected = core.collect(observation, settings.infra_retries)
        retried, replaced, requeue = self._start_retries(namespace, cache, settings, owner, collected)
        records = self._records(cache, collected.endings)

        # 2. store, 3. then delete
        if records:
            cache.results.append(records)
            cache.verdicts.flush()  # index entries only for records already stored
        for kind, reason, text in core.pass_events(retried, records):
            self.events.emit(run.source, kind, reason, text, now_iso())
        self._delete_ended(namespace, selector, list(collected.delete_items), cache.deleting)
        for job_name in (*collected.delete_jobs, *replaced):
            self.kube.delete(JOBS, namespace, job_name)
            self._wrote(namespace, deleted=job_name)

        if run.cancel:
            if jobs:
                self.kube.delete_collection(JOBS, namespace, selector=selector)
            # Model calls already paid for are stored (answers become records); none starts any more.
            running = self.generations.stop_run(cache.uid)
            self._store_finished_generations(namespace, name, cache)
            if running:
                message = f"cancelling: waiting for {running} model call(s) to return"
                self._write_status(run, cache, {"phase": "Running", "message": message, "inFlight": running})
                return None  # the pool requeues the run as each call returns
            return self._finish(run, cache, Finish("Cancelled", "cancelled by request", "Cancelled"))

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
                                                       "inFlight": len(collected.active)})  # fmt: skip
                return core.earliest(core.PROBE_SECONDS, wait)
            reused = cache.verdicts.records(cache.results, cache.judge)
            if reused:
                cache.results.append(reused)
                cache.verdicts.flush()
        if aborted is None:
            # The bounds count grader pods; `schedule` counts items, `batch` to a pod in fast mode.
            batch = pod_batch(manifest, settings)
            starts = core.schedule(
                self._pending(namespace, name, cache, collected.active),
                active=len(collected.active),
                starting=collected.starting * batch,
                max_in_flight=settings.max_in_flight * batch,
                creates_per_pass=self.options.creates_per_pass * batch,
                max_starting=self.options.max_starting * batch,
            )
            bodies = self._jobs(cache, settings, owner, starts.jobs)
            created, failed = self._create_jobs(namespace, bodies)
            if starts.records:
                cache.results.append(starts.records)
            started = starts.model_calls + created
            requeue = core.earliest(requeue, starts.requeue_after(failed))

        # 5. status
        ending = core.conclude(
            total=cache.payload.total,
            done=len(cache.results.tallies),
            aborted=aborted,
            in_flight=len(collected.active) + started,
            waiting=collected.waiting,
            queued=collected.queued,
            queue=settings.queue,
            requeue=requeue,
        )
        if isinstance(ending, Finish):
            return self._finish(run, cache, ending)
        wait = self._write_status(run, cache, {"phase": "Running", "message": ending.message,
                                               "inFlight": ending.in_flight})  # fmt: skip
        return core.earliest(ending.requeue, wait)

    def _read_graders(
        self, namespace: str, name: str, selector: str
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], bool]:
        """The run's grader Jobs and their pods: from the watch-fed stores once they listed (True), else LISTed."""
        stores = self.informers.synced(namespace) if self.informers is not None else None
        if stores is not None:
            labels = pod_selector(name)  # what `selector` says, as labels
            jobs = stores[0].select(labels)
            return jobs, stores[1].select(labels) if jobs else [], True
        jobs = self.kube.items(JOBS, namespace, selector=selector)
        return jobs, self.kube.items(PODS, namespace, selector=selector) if jobs else [], False

    def _wrote(self, namespace: str, *, created: dict[str, Any] | None = None, deleted: str = "") -> None:
        """What this process wrote goes into the Jobs store at once (the watch may bring it later)."""
        stores = self.informers.synced(namespace) if self.informers is not None else None
        if stores is None:
            return
        if created is not None:
            stores[0].assume(created)
        if deleted:
            stores[0].forget(deleted)

    def _facts(
        self, namespace: str, cache: RunCache, jobs: tuple[ObservedJob, ...]
    ) -> dict[str, list[GraderFacts] | None]:
        """The facts of finished attempts, per item (None: the log did not answer this time). Logs of every
        attempt whose status alone does not decide (of a sequence: whose pod ran) are read at once."""
        to_read = [(job.pod.name, len(job.items)) for job in jobs if job.pod is not None
                   and log_needed(job.source, job.pod.source, sequence=job.sequence)]  # fmt: skip
        if len(to_read) > 1:
            cache.log_reads.prefetch(self.kube, namespace, to_read, self.log_pool)
        facts: dict[str, list[GraderFacts] | None] = {}
        for job in jobs:
            # the test each task is expected to be (a verdict naming another is no verdict for it)
            test_ids = [self._pod_item(cache, item_id)[0].test_id for item_id in job.items]
            pod = job.pod.source if job.pod is not None else None
            facts[job.name] = finished_attempt_facts(self.kube, namespace, job.source, pod, test_ids, cache.log_reads,
                                                     sequence=job.sequence)  # fmt: skip
        return facts

    def _start_retries(
        self, namespace: str, cache: RunCache, settings: RunSettings, owner: Any, collected: Collection
    ) -> tuple[list[tuple[str, str]], list[str], float | None]:
        """Create the next attempts (before anything of the earlier ones goes). Returns (item, why) of the
        attempts retried, the Jobs they replace, and a requeue delay when one could not be created."""
        retried: list[tuple[str, str]] = []
        replaced: list[str] = []
        requeue = collected.requeue
        for retry in collected.retries:
            pairs = zip(retry.items, retry.item_attempts, strict=True)
            graded = [self._unit_entry(cache, settings, item_id, n) for item_id, n in pairs]
            what = retry.unit if len(retry.items) == 1 else f"{retry.unit} ({len(retry.items)} items)"
            log.info("%s attempt %d: %s; starting attempt %d", what, retry.attempt - 1, retry.reason, retry.attempt)
            body = unit_job(cache.payload.manifest, retry.unit, graded, settings, owner, attempt=retry.attempt,
                            previous_reason=retry.reason)  # fmt: skip
            job = to_dict(body)
            try:
                self.kube.ensure(JOBS, namespace, job)
            except KubeError as exc:  # quota, admission: keep this attempt and try again later
                log.warning("%s: cannot start attempt %d: %s", what, retry.attempt, exc)
                requeue = core.earliest(requeue, core.CREATE_RETRY_SECONDS)
                continue
            self._wrote(namespace, created=job)
            retried.append((what, retry.reason))
            replaced.extend(retry.replaced)  # the new attempt stays
        return retried, replaced, requeue

    def _records(self, cache: RunCache, endings: tuple[Ending, ...]) -> list[Record]:
        """The records of the items step 1 ended, scored as a local run scores them."""
        manifest = cache.payload.manifest
        records: list[Record] = []
        for ending in endings:
            item, usage = self._pod_item(cache, ending.item_id)
            record = score_item(manifest, item, (ending.decision, ending.attempt - 1), usage=usage)
            record = judge_record(cache.judge, manifest, item, record)
            records.append(record)
            image_id = ending.job.pod.image_id if ending.job.pod is not None else ""
            if ending.graded:  # a verdict a grader decided, never an infra fallback
                cache.verdicts.note(record, item.task, image_id)
            cache.verdicts.image_id = cache.verdicts.image_id or image_id
        return records

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
        except Fenced as exc:  # this replica no longer leads: the next leader's passes delete them
            log.warning("deleting %d collected Jobs in %s not sent: %s", len(labels), namespace, exc)
        finally:
            deleting.difference_update(labels)

    def _store_finished_generations(self, namespace: str, name: str, cache: RunCache) -> None:
        records: list[Record] = []
        for item_id in self.generations.finished(cache.uid):
            item = cache.payload.item(item_id)
            state = self._generated(namespace, name, cache, item)
            if isinstance(state, Record):
                records.append(state)
            elif isinstance(state, StoredGeneration) and not state.generated.item.needs_grader:
                records.append(record_without_pod(cache.payload.manifest, item, state.generated))
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
            return TaskSource(cache.generated_items[item.item_id].shard, key)
        return TaskSource(payload_name(settings.name, cache.payload.chunk_of[item.item_id]), key)

    def _pod_item(self, cache: RunCache, item_id: str) -> tuple[ManifestItem, Usage | None]:
        if item_id in cache.generated_items:
            generated = cache.generated_items[item_id].generated
            return generated.item, generated.usage
        return cache.payload.item(item_id), None

    def _pending(self, namespace: str, name: str, cache: RunCache, active: frozenset[str]) -> Iterator[Pending]:
        """Items with neither a record nor a Job, in payload order, each with what it needs (read lazily:
        `core.schedule` takes only as many as it has room for)."""
        order = cache.payload.order
        cache.cursor = core.advance(order, cache.cursor, cache.results)
        unstarted = core.unstarted(order, cache.cursor, cache.results, active)
        return (self._need(namespace, name, cache, item_id) for item_id in unstarted)

    def _need(self, namespace: str, name: str, cache: RunCache, item_id: str) -> Pending:
        """What an item needs now. Model items first get their candidate (a call started in the pool, or
        the pool's finished call stored); items that need no grader are scored here."""
        manifest = cache.payload.manifest
        item = original = cache.payload.item(item_id)
        generated: Generated | None = None
        if item.candidate is None:
            state = self._generated(namespace, name, cache, item)
            if isinstance(state, CallRunning):
                return Pending(item_id, "model")
            if isinstance(state, Record):
                return Pending(item_id, "none", record=state)
            generated = state.generated
            item = generated.item
        if not item.needs_grader:
            return Pending(item_id, "none", record=record_without_pod(manifest, original if generated else item,
                                                                      generated))  # fmt: skip
        return Pending(item_id, "grader", item=item)

    def _unit_entry(
        self, cache: RunCache, settings: RunSettings, item_id: str, attempt: int, item: ManifestItem | None = None
    ) -> tuple[ManifestItem, TaskSource, int]:
        """What a unit Job needs of one item: the item (with its candidate), where its task is, its attempt."""
        if item is None:
            item, _ = self._pod_item(cache, item_id)
        return item, self._task_source(cache, settings, item), attempt

    def _jobs(self, cache: RunCache, settings: RunSettings, owner: Any, pending: tuple[Pending, ...]) -> list[
        dict[str, Any]
    ]:  # fmt: skip
        """The Jobs for the items step 4 chose, in order: one each, or in fast mode `candidates_per_pod` to a pod."""
        graded = [self._unit_entry(cache, settings, p.item_id, 1, p.item) for p in pending]
        manifest = cache.payload.manifest
        return [to_dict(unit_job(manifest, unit[0][0].item_id, unit, settings, owner))
                for unit in units(graded, pod_batch(manifest, settings))]  # fmt: skip

    def _create_jobs(self, namespace: str, bodies: list[dict[str, Any]]) -> tuple[int, int]:
        """Create Jobs concurrently (each request waits on the API server, not on this process); the
        client's write budget still paces them. Returns (created or already there, failed)."""

        def create(body: dict[str, Any]) -> bool:
            try:
                self.kube.ensure(JOBS, namespace, body)
            except KubeError as exc:
                log.warning("cannot create Job %s: %s", body["metadata"]["name"], exc)
                return False
            self._wrote(namespace, created=body)
            return True

        done = list(self.write_pool.map(create, bodies))
        return sum(done), len(done) - sum(done)

    def _generated(self, namespace: str, name: str, cache: RunCache, item: ManifestItem) -> GenerationState:
        """Model items: the stored candidate; else the pool's finished call, stored before any Job uses it
        (or the record of a call that gave no candidate); else the call, started now or earlier, runs."""
        if item.item_id in cache.generated_items:
            return cache.generated_items[item.item_id]
        manifest = cache.payload.manifest
        outcome = self.generations.take(cache.uid, item.item_id)
        if outcome is None:
            self.generations.start((namespace, name), cache.uid, manifest, item)
            return CallRunning()
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
        stored = cache.generated_items[item.item_id] = StoredGeneration(generated, where.get(task_data_key(key), ""))
        return stored

    # ---- writes ---------------------------------------------------------------------------
    def _delete_leftover_jobs(self, namespace: str, name: str) -> None:
        selector = run_selector(name, COMPONENT_GRADER)
        jobs = self.kube.items(JOBS, namespace, selector=selector)  # live: a requeue grades their items again
        stores = self.informers.synced(namespace) if self.informers is not None else None
        if jobs:
            # A finished run keeps nothing running; no Job of it is needed any more.
            self.kube.delete_collection(JOBS, namespace, selector=selector)
        for job in (stores[0].select(pod_selector(name)) if stores is not None else []) + jobs:
            self._wrote(namespace, deleted=observe_job(job).name)  # no later pass sees them (a late event neither)

    def _finish(self, run: ObservedRun, cache: RunCache, ending: Finish) -> float | None:
        fields = {"phase": ending.phase, "message": ending.message, "inFlight": 0, "completionTime": now_iso()}
        self._write_status(run, cache, fields, force=True, reason=ending.reason)
        self._forget(run.namespace, run.name)
        return None

    def _write_status(
        self,
        run: ObservedRun,
        cache: RunCache | None,
        fields: dict[str, Any],
        *,
        force: bool = False,
        reason: str = "Grading",
    ) -> float | None:
        """Merge-patch the status subresource when it changed (`core.status_write`); a change of the conditions
        that people care about is an Event. Returns a requeue delay when deferred."""
        old = run.status
        new: dict[str, Any] = {"observedGeneration": run.generation}
        if cache is not None:
            total = cache.payload.total
            new.update(cache.results.summary())
            new.update(cache.verdicts.index_summary())
            if cache.generated.shards:
                new["generatedConfigMaps"] = [n for n, _ in cache.generated.shards]
            new.update(manifestDigest=run.manifest_digest, suite=cache.suite.suite,
                       suiteDigest=cache.suite.digest, suiteVerified=cache.suite.verified)  # fmt: skip
            ignored = [n for s in (cache.results.shards, cache.generated, cache.verdicts.index) for n in s.ignored]
            if ignored:
                new["ignored"] = sorted(set(ignored) | set(old.get("ignored") or []))
            if cache.verdicts.image_id:
                new["graderImageID"] = cache.verdicts.image_id
            new["total"] = total
            new["progress"] = f"{new['done']}/{total}"
        new.update(fields)
        since = None if cache is None else time.monotonic() - cache.last_status_write
        now = now_iso()
        write = core.status_write(old, new, reason=reason, now=now, force=force, since_write=since,
                                  interval=self.options.status_interval)  # fmt: skip
        if not write.patch:
            return write.wait
        self.kube.patch(RUNS, run.namespace, run.name, {"status": write.patch}, subresource="status")
        for kind, why in write.events:
            self.events.emit(run.source, kind, why, write.message, now)
        run.status.update(write.patch)  # what a later write of this pass compares with
        if cache is not None:
            cache.last_status_write = time.monotonic()
        return None
