"""From a finished grader attempt to a decision, and from the last decision to a record.

The facts are read as the local Kubernetes executor reads them (`wpbench_k8s.kube.facts`), the
decision is `outcome.decide_outcome`, and the record is `steps.score_item`: a cluster run and
a local run score every failure path the same way.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from wpbench_controller.generation import Generated
from wpbench_k8s.errors import InputError
from wpbench_k8s.kube.client import Kube, KubeError
from wpbench_k8s.kube.facts import (
    LOG_READ_TRIES,
    attempt_events,
    attempt_facts,
    log_limit,
    sequence_facts,
    status_facts,
)
from wpbench_k8s.kube.names import GRADER_CONTAINER
from wpbench_k8s.manifest import ManifestItem, RunManifest
from wpbench_k8s.outcome import GraderFacts
from wpbench_k8s.records import Record
from wpbench_k8s.scoring import NotGraded, build_record
from wpbench_k8s.steps import score_item

log = logging.getLogger(__name__)


@dataclass
class LogReads:
    """Failed log reads per pod: a finished pod's log is tried once per pass, LOG_READ_TRIES times at most.

    `prefetch` reads many logs at once (each a request waiting on the API server, not on this
    process), so a pass that collects hundreds of pods does not read them one after another.
    """

    failures: dict[str, tuple[int, str]] = field(default_factory=dict)
    prefetched: dict[str, tuple[bytes | None, str, bool]] = field(default_factory=dict)

    def prefetch(self, kube: Kube, namespace: str, pods: list[tuple[str, int]], pool: ThreadPoolExecutor) -> None:
        """Read the logs of (pod, how many tasks it graded) at once."""
        answers = pool.map(lambda p: self._read(kube, namespace, *p), pods)
        for (pod, _), answer in zip(pods, answers, strict=True):
            self.prefetched[pod] = answer

    def read(self, kube: Kube, namespace: str, pod: str, tasks: int = 1) -> tuple[bytes | None, str, bool]:
        """(log, error, final): final is False while another pass should try again."""
        answer = self.prefetched.pop(pod, None)
        return answer if answer is not None else self._read(kube, namespace, pod, tasks)

    def _read(self, kube: Kube, namespace: str, pod: str, tasks: int = 1) -> tuple[bytes | None, str, bool]:
        try:
            data = kube.log(namespace, pod, GRADER_CONTAINER, limit_bytes=log_limit(tasks))
        except KubeError as exc:
            tries = self.failures.get(pod, (0, ""))[0] + 1
            self.failures[pod] = (tries, str(exc))
            log.warning("log of %s/%s not readable (%s), read %d of %d", namespace, pod, exc, tries, LOG_READ_TRIES)
            return None, str(exc), tries >= LOG_READ_TRIES
        self.failures.pop(pod, None)
        return data, "", True

    def forget(self, pod: str) -> None:
        self.failures.pop(pod, None)
        self.prefetched.pop(pod, None)


def log_needed(job: dict[str, Any], pod: dict[str, Any] | None, *, sequence: bool) -> bool:
    """Whether a finished attempt's facts need its pod's log: when its status alone does not decide, and for a
    pod grading a sequence whenever it ran (the items that answered before the end keep their verdicts)."""
    if pod is None:
        return False
    decided = status_facts(job, pod, test_id=None)
    return decided is None or (sequence and decided.started)


def finished_attempt_facts(
    kube: Kube,
    namespace: str,
    job: dict[str, Any],
    pod: dict[str, Any] | None,
    test_ids: list[str],
    reads: LogReads,
    *,
    sequence: bool = False,
) -> list[GraderFacts] | None:
    """The facts of a finished attempt, per item (one for a Job grading one item; `kube.facts.sequence_facts` for
    a pod grading a sequence), or None while its log should be read again on a later pass."""
    events = attempt_events(kube, namespace, job["metadata"]["name"]) if pod is None else None
    log_bytes, error = None, ""
    if log_needed(job, pod, sequence=sequence):
        assert pod is not None
        name = pod["metadata"]["name"]
        log_bytes, error, final = reads.read(kube, namespace, name, len(test_ids))
        if log_bytes is None and not final:
            return None
        reads.forget(name)
    if sequence:
        return sequence_facts(job, pod, test_ids=test_ids, log=log_bytes, log_error=error, events=events)
    return [attempt_facts(job, pod, test_id=test_ids[0], log=log_bytes, log_error=error, events=events)]


def record_without_pod(manifest: RunManifest, item: ManifestItem, generated: Generated | None = None) -> Record:
    """Knowledge items and unextractable completions: scored in the controller by the local run's own
    scoring step (`steps.score_item`), so answers and usage are recorded alike.

    For model items, `item` is the manifest's (no candidate) and `generated` the stored model call.
    """
    usage = generated.usage if generated else None
    try:
        if generated is not None:
            if generated.item.candidate is not None:
                item = item.with_candidate(generated.item.candidate)
            return score_item(manifest, item, usage=usage, answer=generated.answer, error=generated.error)
        return score_item(manifest, item)
    except (InputError, ImportError) as exc:
        return build_record(manifest, item, NotGraded(f"not gradable: {exc}"), usage=usage)
