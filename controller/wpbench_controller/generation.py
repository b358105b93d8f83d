"""Model calls for model runs happen here, in the controller (API keys from a Secret), never in pods.

`generate_candidates(manifest, item)` is the hook the models work fills in. Reference, exploit and
completions runs never reach it: their candidates travel in the manifest.
"""

from __future__ import annotations

from dataclasses import dataclass

from wpbench_k8s.manifest import ManifestItem, RunManifest
from wpbench_k8s.records import Usage


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
