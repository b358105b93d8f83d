"""The verdict cache in the cluster: a verdict an earlier run of the namespace stored is not graded again.

The key is the local cache's (`wpbench_k8s.cache.verdict_key`: task, grader image id, limits, timeout,
profile). Each run keeps an index beside its results, `<run>-verdicts-N` ConfigMaps owned by the run:
verdict key -> the key of the record holding that verdict in the run's result shards. A run reads every
index of its namespace once (one paged LIST) and then the result shards of only the runs that hold one
of its keys, so the API reads grow with the runs referenced, not with the items. Deleting a run deletes
its index with it. Only verdicts a grader decided are indexed, never an infrastructure failure's fallback,
and only records stored whole (a record cut to fit a shard no longer holds the verdict byte for byte).
An index or result shard counts only when the run it claims (label) lists it in its status, which only
the controller writes (`results.trusted`): anything else is ignored and reported.

The image id is the one the kubelet reports (`status.containerStatuses[].imageID`): before anything is
graded, the id an `image-probe` pod reports (the grader image's tag running `true`, deleted once read).
It is resolved once per run and kept in the run's status (`graderImageID`): every grader Job then runs
that id instead of the tag (`kube.objects.pinned_image`), every record carries it (`grader_image_id`),
and it is the image part of the verdict keys, for the index and for the lookup.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client as k8s

from wpbench_k8s.cache import verdict_key
from wpbench_k8s.kube.client import CONFIG_MAPS, PODS, RUNS, Kube, KubeError, NotFound, to_dict
from wpbench_k8s.kube.names import (
    COMPONENT_PROBE,
    COMPONENT_RESULTS,
    COMPONENT_VERDICTS,
    GRADER_CONTAINER,
    LABEL_RUN,
    component_selector,
    run_labels,
    run_selector,
)
from wpbench_k8s.kube.objects import RunSettings, TaskSource, item_job
from wpbench_k8s.kube.results import Shards, fit_record, listed_shards, record_key, trusted
from wpbench_k8s.manifest import ManifestItem, RunManifest
from wpbench_k8s.outcome import Scored
from wpbench_k8s.records import Record, json_line
from wpbench_k8s.steps import RecordJudge, judge_record, score_item
from wpbench_runtime.contract import GradeTask, Verdict

log = logging.getLogger(__name__)

# (message, the run the ConfigMap claims to belong to, when it exists)
Report = Callable[[str, dict[str, Any] | None], None]


def pod_image_id(pod: dict[str, Any] | None) -> str:
    """The image id the kubelet reports for the grader container ("" before it was created)."""
    for status in ((pod or {}).get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == GRADER_CONTAINER and status.get("imageID"):
            return str(status["imageID"])
    return ""


def any_index(kube: Kube, namespace: str) -> bool:
    """Whether any run of the namespace keeps a verdict index (no lookup, no probe without one)."""
    pages = kube.pages(CONFIG_MAPS, namespace, selector=component_selector(COMPONENT_VERDICTS), limit=1)
    return next(pages, None) is not None


def lookup(
    kube: Kube, namespace: str, wanted: dict[str, list[str]], report: Report | None = None
) -> dict[str, Verdict]:
    """Verdicts earlier runs stored for `wanted` (verdict key -> item ids). Returns item id -> verdict.

    `report` hears of every ConfigMap ignored because the run it claims does not list it (with that run,
    when it exists).
    """
    refs: dict[str, dict[str, list[str]]] = {}  # run -> record key -> verdict keys
    runs: dict[str, dict[str, Any] | None] = {}

    def run_of(name: str) -> dict[str, Any] | None:
        if name not in runs:
            try:
                runs[name] = kube.get(RUNS, namespace, name)
            except NotFound:
                runs[name] = None
        return runs[name]

    def ours(cm: dict[str, Any], run_name: str, status_field: str) -> bool:
        run = run_of(run_name) if run_name else None
        if run is not None and trusted(cm, listed_shards(run, status_field), run["metadata"]["uid"]):
            return True
        if report is not None:
            report(f"ConfigMap {cm['metadata']['name']} claims to be {status_field[:-10]} of run {run_name or '?'}, "
                   f"which does not list it in status.{status_field}: ignored", run)  # fmt: skip
        return False

    for cm in kube.pages(CONFIG_MAPS, namespace, selector=component_selector(COMPONENT_VERDICTS), limit=20):
        run = (cm["metadata"].get("labels") or {}).get(LABEL_RUN, "")
        hits = [(key, where) for key, where in (cm.get("data") or {}).items() if key in wanted]
        if not hits or not ours(cm, run, "verdictConfigMaps"):
            continue
        for key, where in hits:
            refs.setdefault(run, {}).setdefault(where, []).append(key)
    found: dict[str, Verdict] = {}
    for run, records in refs.items():
        for cm in kube.pages(CONFIG_MAPS, namespace, selector=run_selector(run, COMPONENT_RESULTS), limit=1):
            if not ours(cm, run, "resultConfigMaps"):
                continue
            for where, value in (cm.get("data") or {}).items():
                if where not in records:
                    continue
                record = Record.model_validate_json(value)
                if record.grader.verdict is None or record.grader.status == "infra_error":
                    continue
                for key in records[where]:
                    for item_id in wanted[key]:
                        found.setdefault(item_id, record.grader.verdict)
    return found


class ImageProbe:
    """The pod that learns the grader image id before a run with cached verdicts grades anything."""

    def __init__(self, kube: Kube, settings: RunSettings, owner: k8s.V1OwnerReference) -> None:
        self.kube = kube
        self.settings = settings
        self.owner = owner
        self.name = f"{settings.name}-{COMPONENT_PROBE}"

    def pod(self, manifest: RunManifest, item: ManifestItem, source: TaskSource) -> dict[str, Any]:
        """A grader pod of `item` (same image, pull policy, limits and lock-down) that only runs `true`."""
        job = item_job(manifest, item, self.settings, source, self.owner)
        spec: Any = job.spec.template.spec  # type: ignore[union-attr]
        spec.containers[0].command = ["true"]
        spec.containers[0].args = None
        # `true` needs next to nothing: a small request lets the probe start beside running graders.
        small = {"cpu": "10m", "memory": "32Mi"}
        spec.containers[0].resources = k8s.V1ResourceRequirements(requests=small, limits=small)
        spec.active_deadline_seconds = self.settings.start_seconds
        meta = k8s.V1ObjectMeta(
            name=self.name,
            namespace=self.settings.namespace,
            labels=run_labels(self.settings.name, COMPONENT_PROBE),
            owner_references=[self.owner],
        )
        return to_dict(k8s.V1Pod(api_version="v1", kind="Pod", metadata=meta, spec=spec))

    def image_id(self, body: Callable[[], dict[str, Any]]) -> str | None:
        """The reported id ("" when the probe cannot run), or None while it starts (created from `body()`)."""
        try:
            pod = self.kube.get(PODS, self.settings.namespace, self.name)
        except NotFound:
            try:
                self.kube.ensure(PODS, self.settings.namespace, body())
            except KubeError as exc:  # quota, admission: run without the cache rather than not at all
                log.warning("run %s: image probe not created: %s", self.settings.name, exc)
                return ""
            return None
        found = pod_image_id(pod)
        # A real kubelet reports the id once the container exists; a simulated node (kwok) may run the pod
        # and never report one: then the run goes on unpinned, on the tag.
        if found or (pod.get("status") or {}).get("phase") in ("Running", "Succeeded", "Failed"):
            self.kube.delete(PODS, self.settings.namespace, self.name)
            return found
        return None


@dataclass
class RunVerdicts:
    """One run's side of the cache: its lookup (once per run) and the index entries it adds.

    Rebuilt with the rest of the controller's memory of a run; `index` is the run's own index shards.
    """

    kube: Kube
    namespace: str
    manifest: RunManifest
    index: Shards
    enabled: bool
    image_id: str = ""
    # The run's items, read when needed (the controller keeps none in memory); default: the manifest's.
    items: Callable[[], Iterable[ManifestItem]] | None = None
    reuse: dict[str, Verdict] | None = None  # item id -> an earlier run's verdict; None until looked up
    pending: dict[str, str] = field(default_factory=dict)  # verdict key -> record key, written after the records
    report: Report | None = None  # hears of untrusted ConfigMaps the lookup ignored
    probed: bool = False  # the probe answered (its id may be "": it could not run)
    stamp: dict[str, Any] | None = None  # fields every record of the run is stored with (ResultStore.stamp)

    def __post_init__(self) -> None:
        self._pin()

    def _pin(self) -> None:
        """Grader Jobs run the resolved image, and records name it; until then (or when the probe could not
        run) the tag, and records name none. What a submitter wrote in the manifest's image_id is replaced."""
        self.manifest.grader.image_id = self.image_id
        if self.stamp is not None and self.image_id:
            self.stamp["grader_image_id"] = self.image_id

    def key(self, task: GradeTask, image_id: str) -> str:
        grader = self.manifest.grader.model_copy(update={"image_id": image_id})
        return verdict_key(self.manifest.model_copy(update={"grader": grader}), task)

    def prepare(self, done: Container[str], probe: Callable[[], str | None]) -> bool:
        """Resolve the grader image (once per run: `probe`), then look up what earlier runs stored for the
        items not done yet. False while the image id is being learnt."""
        if self.reuse is not None:
            return True
        if not self.image_id and not self.probed:
            found = probe()
            if found is None:
                return False
            self.image_id, self.probed = found, True
            self._pin()
        if not self.enabled or not any_index(self.kube, self.namespace):
            self.reuse = {}
            return True
        wanted: dict[str, list[str]] = {}
        if self.image_id:
            for item in self._items():
                if item.task is not None and item.needs_grader and item.item_id not in done:
                    wanted.setdefault(self.key(item.task, self.image_id), []).append(item.item_id)
        self.reuse = lookup(self.kube, self.namespace, wanted, self.report) if wanted else {}
        log.info("verdict cache: %d of %d items not done found in earlier runs", len(self.reuse), len(wanted))
        return True

    def records(self, done: Container[str], judge: RecordJudge | None) -> list[Record]:
        """Records for the items an earlier run's verdict settles, scored as a local cache hit is."""
        found: list[Record] = []
        if not self.reuse:
            return found
        for item in self._items():
            verdict = (self.reuse or {}).get(item.item_id)
            if verdict is None or item.item_id in done:
                continue
            record = score_item(self.manifest, item, (Scored(verdict), 0))
            record = judge_record(judge, self.manifest, item, record)
            record.cached = True
            self.note(record, item.task, self.image_id)
            found.append(record)
        return found

    def _items(self) -> Iterable[ManifestItem]:
        return self.items() if self.items is not None else self.manifest.items

    def note(self, record: Record, task: GradeTask | None, image_id: str) -> None:
        """Index a record whose verdict a grader decided (call only for those), graded on `image_id`."""
        verdict = record.grader.verdict
        if not self.enabled or task is None or not image_id or verdict is None:
            return
        if record.grader.status == "infra_error" or fit_record(record) != json_line(record):
            return
        self.pending[self.key(task, image_id)] = record_key(record.item_id)

    def index_summary(self) -> dict[str, Any]:
        """The run's index shards, for its status (readers of the cache trust only those)."""
        return {"verdictConfigMaps": [name for name, _ in self.index.shards]} if self.index.shards else {}

    def flush(self) -> None:
        """Write the noted index entries (after their records are stored)."""
        if self.pending:
            self.index.put(self.pending)
            self.pending = {}
