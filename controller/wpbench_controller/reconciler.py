"""Level-triggered reconciliation of one WPBenchRun: observe the cluster, act, write status.

Every pass starts from what the cluster says (the run, its Jobs and pods, its result shards), so a
pass can be repeated or interrupted anywhere without losing or duplicating a verdict:

1. collect finished Jobs: read each verdict, build its record;
2. store those records in the run's result ConfigMaps (one write per batch);
3. only then delete the collected Jobs;
4. start Jobs for items that have neither a result nor a Job, up to the run's in-flight bound;
5. write the status when it changed (counters at most every `status_interval` seconds).

What this process keeps in memory (the reassembled manifest, result tallies) is a cache of cluster
state, rebuilt after a restart.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kubernetes import client as k8s

from wpbench_controller import crd
from wpbench_controller.collector import collect, record_without_pod
from wpbench_controller.generation import Generated, GenerationUnavailable, generate_candidates
from wpbench_controller.objects import (
    COMPONENT_GENERATED,
    RunSettings,
    item_job,
    needs_pod,
    network_policy,
    owner_reference,
)
from wpbench_controller.payload import Payload, PayloadError, join_manifest, payload_name, task_data_key
from wpbench_controller.results import ResultStore, Shards
from wpbench_k8s.errors import InputError
from wpbench_k8s.executor.kubernetes import (
    ANNOTATION_ITEM_ID,
    DEFAULT_INFRA_RETRIES,
    LABEL_ITEM,
    LABEL_RUN,
    Kube,
    TaskSource,
    label_value,
    read_json,
    to_dict,
)
from wpbench_k8s.manifest import Candidate, ManifestItem
from wpbench_k8s.records import Record, Usage
from wpbench_k8s.scoring import build_record

log = logging.getLogger(__name__)


def _task_with_candidate(item: ManifestItem) -> ManifestItem:
    """The item whose grader task carries its candidate's code or files (what ItemGrader grades)."""
    if item.task is None or item.candidate is None:
        return item
    task = item.task.model_copy(update={"code": item.candidate.code, "files": item.candidate.files})
    return item.model_copy(update={"task": task})


def _generated_from_json(item: ManifestItem, stored: str) -> Generated:
    doc = json.loads(stored)
    candidate = Candidate.model_validate(doc["candidate"])
    filled = _task_with_candidate(item.model_copy(update={"candidate": candidate}))
    usage = Usage.model_validate(doc["usage"]) if doc.get("usage") else None
    return Generated(item=filled, usage=usage, answer=doc.get("answer"))


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class RunCache:
    """What this controller remembers about one run between passes (all of it rebuildable)."""

    uid: str
    payload: Payload
    results: ResultStore
    generated: Shards
    generated_items: dict[str, tuple[Generated, str]] = field(default_factory=dict)  # id -> (generation, shard)
    policy_ready: bool = False
    last_status_write: float = 0.0


@dataclass
class Options:
    default_max_in_flight: int = 2
    default_infra_retries: int = DEFAULT_INFRA_RETRIES
    image_pull_policy: str = "IfNotPresent"
    status_interval: float = 2.0  # seconds between counter-only status writes
    # Model calls start in one pass only within this many seconds of its first one: items that need no
    # pod (knowledge answers, provider errors) take no in-flight slot, so without it one pass could call
    # the model for every such item before storing a record, writing status or seeing a cancel.
    generation_seconds: float = 5.0


class Reconciler:
    """Drives runs to completion. One instance per controller process; `reconcile` is not reentrant."""

    def __init__(self, api: k8s.ApiClient, options: Options | None = None) -> None:
        kube = Kube(api)
        self.core, self.batch, self.net, self.custom = kube.core, kube.batch, kube.net, kube.custom
        self.options = options or Options()
        self.cache: dict[tuple[str, str], RunCache] = {}

    # ---- entry point ----------------------------------------------------------------------
    def reconcile(self, namespace: str, name: str) -> float | None:
        """One pass over one run. Returns seconds after which to look again (None: wait for events)."""
        try:
            run: dict[str, Any] = self.custom.get_namespaced_custom_object(
                crd.GROUP, crd.VERSION, namespace, crd.PLURAL, name
            )
        except k8s.ApiException as exc:
            if exc.status == 404:
                self.cache.pop((namespace, name), None)
                return None
            raise
        if run["metadata"].get("deletionTimestamp"):
            return None
        status = run.get("status") or {}
        if status.get("phase") in crd.TERMINAL_PHASES:
            self.cache.pop((namespace, name), None)
            self._delete_leftover_jobs(namespace, name, run)
            return None
        cache = self._cache(namespace, name, run)
        if isinstance(cache, str):
            phase = "Failed" if cache.startswith("invalid") else "Pending"
            self._write_status(run, None, {"phase": phase, "message": cache}, force=True)
            return 5.0 if phase == "Pending" else None
        return self._pass(namespace, name, run, cache)

    # ---- state ----------------------------------------------------------------------------
    def _cache(self, namespace: str, name: str, run: dict[str, Any]) -> RunCache | str:
        uid = run["metadata"]["uid"]
        cached = self.cache.get((namespace, name))
        if cached is not None and cached.uid == uid:
            return cached
        maps = run["spec"]["payload"]["configMaps"]
        chunks: list[dict[str, str]] = []
        for cm_name in maps:
            try:
                cm = read_json(self.core.read_namespaced_config_map(cm_name, namespace, _preload_content=False))
            except k8s.ApiException as exc:
                if exc.status == 404:
                    return f"waiting for payload: {len(chunks)}/{len(maps)} ConfigMaps present"
                raise
            chunks.append(cm.get("data") or {})
        try:
            payload = join_manifest(chunks, run["spec"]["manifestDigest"])
        except (PayloadError, ValueError) as exc:
            return f"invalid payload: {exc}"
        results = ResultStore(self.core, namespace, name, uid)
        results.load()
        generated = Shards(self.core, namespace, name, uid, COMPONENT_GENERATED)
        cache = RunCache(uid, payload, results, generated)
        self._load_generated(cache)
        self.cache[(namespace, name)] = cache
        log.info(
            "run %s/%s: %d items, %d already done", namespace, name, len(payload.manifest.items), len(results.tallies)
        )
        return cache

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
        )

    # ---- one pass -------------------------------------------------------------------------
    def _pass(self, namespace: str, name: str, run: dict[str, Any], cache: RunCache) -> float | None:
        settings = self.settings(namespace, name, run)
        manifest = cache.payload.manifest
        owner = owner_reference(name, cache.uid)
        selector = f"{LABEL_RUN}={label_value(name)}"
        jobs = read_json(self.batch.list_namespaced_job(namespace, label_selector=selector, _preload_content=False))[
            "items"
        ]
        pods_by_item: dict[str, list[dict[str, Any]]] = {}
        if jobs:
            pods = read_json(self.core.list_namespaced_pod(namespace, label_selector=selector, _preload_content=False))
            for pod in pods["items"]:
                pods_by_item.setdefault(pod["metadata"].get("labels", {}).get(LABEL_ITEM, ""), []).append(pod)

        # 1. collect
        records: list[Record] = []
        finished: list[str] = []
        active: set[str] = set()
        requeue: float | None = None
        for job in jobs:
            item_id = (job["metadata"].get("annotations") or {}).get(ANNOTATION_ITEM_ID, "")
            job_name = job["metadata"]["name"]
            if item_id in cache.results or item_id not in cache.payload.keys:
                finished.append(job_name)  # already stored (a previous pass died before deleting) or stale
                continue
            item, usage = self._pod_item(cache, item_id)
            got = collect(
                self.core,
                namespace,
                manifest,
                item,
                job,
                pods_by_item.get(job["metadata"]["labels"].get(LABEL_ITEM, ""), []),
                usage=usage,
            )
            if got.record is None:
                active.add(item_id)
                if got.outcome.state != "running":
                    requeue = 2.0  # finished but the log was not readable: try again soon
                continue
            records.append(got.record)
            finished.append(job_name)

        # 2. store, 3. then delete
        if records:
            cache.results.append(records)
        for job_name in finished:
            self._delete_job(namespace, job_name)

        cancel = bool(run["spec"].get("cancel"))
        if cancel:
            for job in jobs:
                if job["metadata"]["name"] not in finished:
                    self._delete_job(namespace, job["metadata"]["name"])
            return self._finish(run, cache, "Cancelled", "cancelled by request", in_flight=0)

        # 4. schedule
        aborted = self._aborted(cache) if not manifest.continue_on_error else None
        if not cache.policy_ready:
            self._create(
                lambda: self.net.create_namespaced_network_policy(
                    namespace, to_dict(network_policy(settings, owner)), _preload_content=False
                )
            )
            cache.policy_ready = True
        started = 0
        if aborted is None:
            started, requeue_s = self._schedule(namespace, cache, settings, owner, active)
            if requeue_s is not None:
                requeue = requeue_s if requeue is None else min(requeue, requeue_s)
        in_flight = len(active) + started

        # 5. status
        total = len(manifest.items)
        done = len(cache.results.tallies)
        if done >= total:
            return self._finish(run, cache, "Succeeded", f"{done} items graded", in_flight=0)
        if aborted is not None and in_flight == 0:
            return self._finish(
                run, cache, "Failed", f"stopped at the first error (continue_on_error off): {aborted}", 0
            )
        wait = self._write_status(run, cache, {"phase": "Running", "message": "", "inFlight": in_flight})
        if wait is not None:
            requeue = wait if requeue is None else min(requeue, wait)
        return requeue

    def _pod_item(self, cache: RunCache, item_id: str) -> tuple[ManifestItem, Usage | None]:
        if item_id in cache.generated_items:
            generated, _ = cache.generated_items[item_id]
            return generated.item, generated.usage
        return cache.payload.item(item_id), None

    def _aborted(self, cache: RunCache) -> str | None:
        for item_id, tally in cache.results.tallies.items():
            if tally.error or tally.infra:
                return item_id
        return None

    def _schedule(
        self,
        namespace: str,
        cache: RunCache,
        settings: RunSettings,
        owner: k8s.V1OwnerReference,
        active: set[str],
    ) -> tuple[int, float | None]:
        """Start Jobs up to the in-flight bound; score items that need no pod. Returns (started, requeue).

        Model calls stop starting `generation_seconds` after this pass's first one; the next pass
        goes on at once (requeue 0), after the records so far are stored and the status written.
        """
        manifest = cache.payload.manifest
        slots = settings.max_in_flight - len(active)
        started = 0
        no_pod: list[Record] = []
        calls_until: float | None = None
        more = False
        for item in manifest.items:
            if slots <= 0:
                break
            if item.item_id in cache.results or item.item_id in active:
                continue
            generated: Generated | None = None
            if item.candidate is None:
                if item.item_id not in cache.generated_items:  # a model call
                    if calls_until is None:
                        calls_until = time.monotonic() + self.options.generation_seconds
                    elif time.monotonic() >= calls_until:
                        more = True
                        break
                outcome = self._generate(cache, item)
                if isinstance(outcome, Record):
                    no_pod.append(outcome)
                    continue
                generated, shard = outcome
                item = generated.item
            else:
                shard = payload_name(settings.name, cache.payload.chunk_of[item.item_id])
            if not needs_pod(item):
                original = cache.payload.item(item.item_id)
                no_pod.append(record_without_pod(manifest, original if generated else item, generated))
                continue
            source = TaskSource(shard, task_data_key(cache.payload.keys[item.item_id]))
            job = item_job(manifest, item, settings, source, owner)
            try:
                self._create(
                    lambda job=job: self.batch.create_namespaced_job(namespace, to_dict(job), _preload_content=False)
                )
            except k8s.ApiException as exc:  # quota, admission: say so and try again later
                log.warning(
                    "run %s/%s: cannot create Job for %s: %s", namespace, settings.name, item.item_id, exc.reason
                )
                return started, 10.0
            slots -= 1
            started += 1
        if no_pod:
            cache.results.append(no_pod)
            return started, 0.0  # more may be schedulable now
        return started, 0.0 if more else None

    def _generate(self, cache: RunCache, item: ManifestItem) -> tuple[Generated, str] | Record:
        """Model items: the candidate from the hook, stored in the cluster before any Job uses it."""
        if item.item_id in cache.generated_items:
            return cache.generated_items[item.item_id]
        manifest = cache.payload.manifest
        try:
            generated = generate_candidates(manifest, item)
        except (GenerationUnavailable, InputError) as exc:
            return build_record(manifest, item, None, error=f"generation: {exc}")
        if generated.error or generated.item.candidate is None:
            return build_record(manifest, item, None, usage=generated.usage, error=generated.error or "no candidate")
        candidate = generated.item.candidate
        if generated.item.task is not None:
            generated.item.task = generated.item.task.model_copy(
                update={"code": candidate.code, "files": candidate.files}
            )
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
    def _create(self, call: Any) -> None:
        try:
            call()
        except k8s.ApiException as exc:
            if exc.status != 409:  # deterministic names: 409 means a previous pass made it
                raise

    def _delete_job(self, namespace: str, name: str) -> None:
        try:
            self.batch.delete_namespaced_job(name, namespace, propagation_policy="Background", _preload_content=False)
        except k8s.ApiException as exc:
            if exc.status != 404:
                raise

    def _delete_leftover_jobs(self, namespace: str, name: str, run: dict[str, Any]) -> None:
        jobs = read_json(
            self.batch.list_namespaced_job(
                namespace, label_selector=f"{LABEL_RUN}={label_value(name)}", _preload_content=False
            )
        )["items"]
        if not jobs:
            return
        results = ResultStore(self.core, namespace, name, run["metadata"]["uid"])
        results.load()
        for job in jobs:
            item_id = (job["metadata"].get("annotations") or {}).get(ANNOTATION_ITEM_ID, "")
            # A finished run keeps nothing running; a Job whose result is stored is garbage.
            if item_id in results or run["status"].get("phase") == "Cancelled" or job.get("status", {}).get("active"):
                self._delete_job(namespace, job["metadata"]["name"])

    def _finish(self, run: dict[str, Any], cache: RunCache, phase: str, message: str, in_flight: int) -> float | None:
        self._write_status(
            run,
            cache,
            {"phase": phase, "message": message, "inFlight": in_flight, "completionTime": now_iso()},
            force=True,
        )
        self.cache.pop((run["metadata"]["namespace"], run["metadata"]["name"]), None)
        return None

    def _write_status(
        self, run: dict[str, Any], cache: RunCache | None, fields: dict[str, Any], *, force: bool = False
    ) -> float | None:
        """Merge-patch the status subresource when it changed. Returns a requeue delay when deferred."""
        old = run.get("status") or {}
        new: dict[str, Any] = {"observedGeneration": run["metadata"].get("generation", 1)}
        if cache is not None:
            total = len(cache.payload.manifest.items)
            new.update(cache.results.summary())
            new["total"] = total
            new["progress"] = f"{new['done']}/{total}"
        new.update(fields)
        new.setdefault("startTime", old.get("startTime") or now_iso())
        if old.get("completionTime") and "completionTime" in new:
            new["completionTime"] = old["completionTime"]
        changed = {k: v for k, v in new.items() if old.get(k) != v}
        if not changed:
            return None
        counters_only = not ({"phase", "message", "total"} & set(changed))
        if counters_only and not force and cache is not None:
            wait = self.options.status_interval - (time.monotonic() - cache.last_status_write)
            if wait > 0:
                return wait
        self.custom.patch_namespaced_custom_object_status(
            crd.GROUP,
            crd.VERSION,
            run["metadata"]["namespace"],
            crd.PLURAL,
            run["metadata"]["name"],
            {"status": changed},
            _content_type="application/merge-patch+json",
        )
        run["status"] = {**old, **changed}
        if cache is not None:
            cache.last_status_write = time.monotonic()
        return None
