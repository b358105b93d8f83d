"""Model calls for model runs happen here, in the controller (API keys from a Secret), never in pods.

`generate_candidates(manifest, item)` is the hook the models work fills in. Reference, exploit and
completions runs never reach it: their candidates travel in the manifest.
"""

from __future__ import annotations

import concurrent.futures as futures
import threading
from collections.abc import Callable
from dataclasses import dataclass

from wpbench_k8s.manifest import ManifestItem, RunManifest
from wpbench_k8s.records import Usage

RunKey = tuple[str, str]  # (namespace, run name)


@dataclass
class Generated:
    """One model call's outcome for one item.

    `item` carries the candidate (and, for execution tests, its task with the candidate's code);
    `error` set means no candidate: the record says so and is excluded from aggregates.
    """

    item: ManifestItem
    usage: Usage | None = None
    answer: str | None = None  # knowledge tests: the extracted answer
    error: str | None = None


class GenerationUnavailable(Exception):
    """This controller build cannot call models (the hook is not wired)."""


def generate_candidates(manifest: RunManifest, item: ManifestItem) -> Generated:
    """Ask `item.model` for a candidate for `item.test_id` and return the item with it filled in.

    Called by the reconciler once per model item, before its Job exists; the result is stored in the
    run's `<run>-generated-N` ConfigMaps before any Job is created, so a restarted controller never
    calls the model twice for the same item. API keys come from the Secret the chart mounts into the
    controller's environment (`apiKeySecret`). The model call itself is the local harness's
    (`wpbench_k8s.models.generate.generate_for_item`): same prompt, skills, retries and extraction.

    Raises:
        GenerationUnavailable: the models module (LiteLLM) is not installed in this build.
    """
    try:
        from wpbench_k8s.models.generate import generate_for_item  # imports LiteLLM: only on this path
    except ImportError as exc:
        raise GenerationUnavailable(f"item {item.item_id}: model generation unavailable: {exc}") from exc
    filled, result = generate_for_item(manifest, item)
    return Generated(item=filled, usage=result.usage, answer=result.answer, error=result.error)


class GenerationPool:
    """Model calls off the reconcile worker: at most `workers` at once, so one slow provider delays
    only its own items. A finished call asks for its run to be reconciled again (`notify`)."""

    def __init__(
        self,
        workers: int,
        notify: Callable[[RunKey], None] | None = None,
        call: Callable[[RunManifest, ManifestItem], Generated] | None = None,
    ) -> None:
        self.call = call or generate_candidates
        self._pool = futures.ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="model")
        self._calls: dict[tuple[str, str], futures.Future[Generated]] = {}  # (run uid, item id) -> call
        self._lock = threading.Lock()
        self.notify = notify

    def start(self, run: RunKey, uid: str, manifest: RunManifest, item: ManifestItem) -> None:
        """Start the model call for `item` unless one is running or finished."""
        with self._lock:
            if (uid, item.item_id) in self._calls:
                return
            call = self._pool.submit(self.call, manifest, item)
            self._calls[(uid, item.item_id)] = call
        if self.notify is not None:
            notify = self.notify
            call.add_done_callback(lambda _: notify(run))

    def pending(self, uid: str, item_id: str) -> bool:
        with self._lock:
            call = self._calls.get((uid, item_id))
        return call is not None and not call.done()

    def take(self, uid: str, item_id: str) -> Generated | BaseException | None:
        """A finished call's outcome (forgotten once taken); None while running or never started."""
        with self._lock:
            call = self._calls.get((uid, item_id))
            if call is None or not call.done():
                return None
            del self._calls[(uid, item_id)]
        error = call.exception()
        return error if error is not None else call.result()

    def finished(self, uid: str) -> list[str]:
        """Items of a run whose calls returned and were not taken yet."""
        with self._lock:
            return [item for (run, item), call in self._calls.items() if run == uid and call.done()]

    def stop_run(self, uid: str) -> int:
        """Calls of a run that have not started never will. Returns how many are still running."""
        with self._lock:
            calls = [call for (run, _), call in self._calls.items() if run == uid]
        return sum(1 for call in calls if not call.cancel() and not call.done())

    def forget_run(self, uid: str) -> None:
        """Drop a run's calls (finished or gone): queued ones never start, running ones are ignored."""
        with self._lock:
            for key in [k for k in self._calls if k[0] == uid]:
                self._calls.pop(key).cancel()

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
