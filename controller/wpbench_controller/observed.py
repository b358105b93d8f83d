"""What one reconcile pass sees, typed: the run, its grader Jobs and their pods, read from the API's dicts here.

This module is the one place the reconciler reads Kubernetes objects (`observe_run`, `observe_jobs`); the
decisions (`core.py`) and the shell (`reconciler.py`) only see these frozen values. What a finished
attempt's Job and pod *mean* for the grade stays in `wpbench_k8s.kube.facts`, shared with the local
Kubernetes executor: an `ObservedJob` keeps its source objects (`source`, `pod.source`) for that reader
and nothing else.

A Job grades a tuple of item ids (`ObservedJob.items`), in order: one item, or in fast mode
(`submit --candidates-per-pod`) several in one sequence, each with its own attempt number.
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from wpbench_controller.verdicts import pod_image_id
from wpbench_k8s.kube.facts import condition, job_failed, waiting_reason
from wpbench_k8s.kube.names import (
    ANNOTATION_ITEM_ATTEMPTS,
    ANNOTATION_ITEM_ID,
    ANNOTATION_ITEM_IDS,
    ANNOTATION_KUEUE_DEACTIVATED,
    LABEL_ATTEMPT,
    LABEL_ITEM,
    LABEL_RUN,
    annotation_list,
)
from wpbench_k8s.outcome import GraderFacts


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _int(value: object, default: int) -> int:
    try:
        return int(value)  # type: ignore[call-overload, no-any-return]
    except (TypeError, ValueError):
        return default


def _attempt(labels: Mapping[str, Any]) -> int:
    return _int(labels.get(LABEL_ATTEMPT, "1"), 1)


@dataclass(frozen=True)
class ObservedPod:
    """A grader pod: which attempt of which item label it runs, and how far it got."""

    name: str
    item_label: str
    attempt: int
    created: str  # creationTimestamp ("" unknown): the newest pod of an attempt is the one read
    phase: str  # "Pending" while the API says nothing yet
    waiting: str  # why it is not running yet, in Kubernetes' words ("" when nothing says so)
    image_id: str  # the image id the kubelet reports for the grader container ("" before it ran)
    source: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def starting(self) -> bool:
        return self.phase == "Pending"


@dataclass(frozen=True)
class ObservedJob:
    """A grader Job (one attempt): the items it grades and where it stands."""

    name: str
    items: tuple[str, ...]  # item ids, in the order the grader takes them
    item_label: str  # the item label its every attempt carries (what a deletecollection selects)
    attempt: int  # 1, 2, ...: the unit's attempt (what names the Job)
    unit_id: str = ""  # the item whose label the unit's attempts carry
    item_attempts: tuple[int, ...] = ()  # each item's own attempt number (default: the unit's)
    sequence: bool = False  # fast mode: its pod grades `items` in one sequence (`wpbench-grade --sequence`)
    run: str = ""  # the run label (the run to reconcile when the Job changes)
    complete: bool = False
    failed: bool = False  # Failed, or FailureTarget (set first, and alone when a pod never terminates)
    kueue_deactivated: str = ""  # why Kueue will never admit it again ("" when it may)
    suspended: bool = False  # in Kueue's queue, not in any platform queue yet
    pod: ObservedPod | None = None  # this attempt's newest pod
    source: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def finished(self) -> bool:
        return self.complete or self.failed or bool(self.kueue_deactivated)

    @property
    def unit(self) -> str:
        """What its attempts share: the item label (attempts of one unit replace each other)."""
        return self.item_label

    def attempts(self) -> tuple[int, ...]:
        """Each item's attempt number, in the order of `items`."""
        if len(self.item_attempts) == len(self.items):
            return self.item_attempts
        return (self.attempt,) * len(self.items)


def observe_pod(pod: dict[str, Any]) -> ObservedPod:
    meta = _mapping(pod.get("metadata"))
    labels = _mapping(meta.get("labels"))
    status = _mapping(pod.get("status"))
    return ObservedPod(
        name=str(meta.get("name", "")),
        item_label=str(labels.get(LABEL_ITEM, "")),
        attempt=_attempt(labels),
        created=str(meta.get("creationTimestamp") or ""),
        phase=str(status.get("phase") or "Pending"),
        waiting=waiting_reason(pod),
        image_id=pod_image_id(pod),
        source=pod,
    )


def observe_job(job: dict[str, Any], pod: ObservedPod | None = None) -> ObservedJob:
    meta = _mapping(job.get("metadata"))
    labels = _mapping(meta.get("labels"))
    annotations = _mapping(meta.get("annotations"))
    unit_id = str(annotations.get(ANNOTATION_ITEM_ID, ""))
    items = tuple(annotation_list(annotations, ANNOTATION_ITEM_IDS)) or (unit_id,)
    return ObservedJob(
        name=str(meta.get("name", "")),
        items=items,
        item_label=str(labels.get(LABEL_ITEM, "")),
        attempt=_attempt(labels),
        unit_id=unit_id,
        item_attempts=tuple(_int(n, 1) for n in annotation_list(annotations, ANNOTATION_ITEM_ATTEMPTS)),
        sequence=ANNOTATION_ITEM_IDS in annotations,
        run=str(labels.get(LABEL_RUN, "")),
        complete=condition(job, "Complete") is not None,
        failed=job_failed(job) is not None,
        kueue_deactivated=str(annotations.get(ANNOTATION_KUEUE_DEACTIVATED) or ""),  # as facts.kueue_deactivated
        suspended=bool(_mapping(job.get("spec")).get("suspend")),
        pod=pod,
        source=job,
    )


def observe_jobs(jobs: list[dict[str, Any]], pods: list[dict[str, Any]]) -> tuple[ObservedJob, ...]:
    """The run's grader Jobs, each with its attempt's newest pod (matched by item label and attempt)."""
    newest: dict[tuple[str, int], ObservedPod] = {}
    for raw in pods:
        pod = observe_pod(raw)
        key = (pod.item_label, pod.attempt)
        if key not in newest or pod.created > newest[key].created:
            newest[key] = pod
    observed = []
    for raw in jobs:
        meta = _mapping(raw.get("metadata"))
        labels = _mapping(meta.get("labels"))
        observed.append(observe_job(raw, newest.get((str(labels.get(LABEL_ITEM, "")), _attempt(labels)))))
    return tuple(observed)


@dataclass(frozen=True)
class ObservedRun:
    """A WPBenchRun as the pass read it: what its spec asks and what its status says."""

    namespace: str
    name: str
    uid: str
    generation: int
    deleting: bool  # deletionTimestamp set: its owner references take everything down
    # spec
    manifest_digest: str
    payload_maps: tuple[str, ...]
    suite_digest: str
    requeue: int  # requeues asked (`wpbench-k8s requeue` bumps it)
    cancel: bool
    cache: bool  # the verdict cache (spec.cache, default on)
    max_in_flight: int | None
    infra_retries: int | None
    queue: str
    workload_priority: str
    placement: Any  # parsed (and refused when invalid) by kube.placement
    candidates_per_pod: int  # fast mode: items one grader pod grades (1 otherwise)
    # status
    phase: str  # "" before the controller wrote one
    requeued: int  # requeues done
    accepted_digest: str  # the manifest digest the controller accepted ("" before)
    grader_image_id: str
    controller: str = ""  # the instance that claimed the run ("" unclaimed)
    conditions: tuple[dict[str, Any], ...] = ()
    # as stored, then as this pass's own writes left it (the shell keeps it current): the next patch's base
    status: dict[str, Any] = field(default_factory=dict, repr=False)
    source: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


def observe_run(run: dict[str, Any]) -> ObservedRun:
    meta = _mapping(run.get("metadata"))
    spec = _mapping(run.get("spec"))
    status = _mapping(run.get("status"))
    payload = _mapping(spec.get("payload"))
    max_in_flight = _int(spec.get("maxInFlight"), 0)
    retries = spec.get("infraRetries")
    return ObservedRun(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        generation=_int(meta.get("generation"), 1) or 1,
        deleting=bool(meta.get("deletionTimestamp")),
        manifest_digest=str(spec.get("manifestDigest", "")),
        payload_maps=tuple(str(m) for m in payload.get("configMaps") or []),
        suite_digest=str(spec.get("suiteDigest") or ""),
        requeue=_int(spec.get("requeue"), 0),
        cancel=bool(spec.get("cancel")),
        cache=spec.get("cache", True) is not False,
        max_in_flight=max_in_flight or None,
        infra_retries=None if retries is None else _int(retries, 0),
        queue=str(spec.get("queue") or ""),
        workload_priority=str(spec.get("workloadPriorityClass") or ""),
        placement=spec.get("placement"),
        candidates_per_pod=max(1, _int(spec.get("candidatesPerPod"), 1)),
        phase=str(status.get("phase") or ""),
        requeued=_int(status.get("requeued"), 0),
        accepted_digest=str(status.get("manifestDigest") or ""),
        grader_image_id=str(status.get("graderImageID") or ""),
        controller=str(status.get("controller") or ""),
        conditions=tuple(dict(c) for c in status.get("conditions") or [] if isinstance(c, Mapping)),
        status=dict(status),
        source=run,
    )


@dataclass(frozen=True)
class Observation:
    """What step 1 of a pass decides from: the run's grader Jobs, which items have a record, which items
    the run has, and the facts of the finished attempts that need deciding (`core.to_decide` names them).

    `stored` and `known` are containers (the run's result store, its payload index): a pass never copies
    what grows with the run.
    """

    jobs: tuple[ObservedJob, ...]
    stored: Container[str]  # items with a stored record
    known: Container[str]  # the run's item ids
    # job name -> the facts of its finished attempt, per item in order (`kube.facts.sequence_facts`; one for a Job
    # grading one item); None (or absent): its log did not answer this time
    facts: Mapping[str, Sequence[GraderFacts] | None] = field(default_factory=dict)


@dataclass(frozen=True)
class PayloadChunk:
    """One payload ConfigMap: its data, and whether it is immutable (only then is it what every pod mounts)."""

    immutable: bool
    data: dict[str, str]


def observe_payload_chunk(cm: dict[str, Any]) -> PayloadChunk:
    data = cm.get("data")
    return PayloadChunk(cm.get("immutable") is True, dict(data) if isinstance(data, Mapping) else {})
