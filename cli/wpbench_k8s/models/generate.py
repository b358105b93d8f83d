"""The one function the run pipeline and the in-cluster controller call for a model item.

`generate_candidate(model, test, skills, prompt)` sends the manifest's prompt (or builds it with
`prompts.build_prompt`, the function the planner uses) with the skills as a system message, and
turns the completion into a `Candidate`:

- execution tests: the extracted PHP code or plugin files map, or `extraction_error` when the
  completion holds nothing gradable (a model failure: graded as failed, not retried);
- knowledge tests: the raw answer in `Candidate.raw` and `answer` (scored later, once, by the
  pipeline's knowledge step).

A provider problem (unknown model, missing key, outage after retries) is not raised: it comes back
as `error` (one line naming the model) with the usage spent, so the caller marks the record errored
and excludes it from aggregates. Nothing here writes to a terminal.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Protocol

from pydantic import BaseModel, ConfigDict

from wpbench_k8s.dataset import ExecutionTest, KnowledgeTest, test_from_dict
from wpbench_k8s.errors import InputError
from wpbench_k8s.manifest import Candidate, ManifestItem, ModelSpec, RunManifest, SkillSpec
from wpbench_k8s.models import prompts
from wpbench_k8s.models.client import ModelCallError, RetryPolicy, complete
from wpbench_k8s.models.extract import extract_candidate
from wpbench_k8s.profiles import ProfileName, get_profile
from wpbench_k8s.records import Usage


class GenerationResult(BaseModel):
    """What one model call gave: the candidate, the usage spent, and why there is none if so."""

    model_config = ConfigDict(extra="forbid")
    candidate: Candidate
    usage: Usage
    error: str | None = None  # provider/config failure: the record is errored, not failed
    answer: str | None = None  # knowledge tests: the model's answer text


class Generator(Protocol):
    """Writes one candidate: `generate_candidate` (tests pass their own)."""

    def __call__(
        self,
        model: ModelSpec,
        test: ExecutionTest | KnowledgeTest,
        skills: list[SkillSpec],
        prompt: str | None = None,
        *,
        profile: ProfileName = "wpbench",
    ) -> GenerationResult:
        """Never raises for a provider problem: that comes back as `error`, with the usage spent."""
        ...


def candidate_label(model: ModelSpec, skills: Sequence[SkillSpec]) -> str:
    return model.name + (" +skills:" + ",".join(s.name for s in skills) if skills else "")


def generate_candidate(
    model: ModelSpec,
    test: ExecutionTest | KnowledgeTest,
    skills: list[SkillSpec],
    prompt: str | None = None,
    *,
    retry: RetryPolicy | None = None,
    profile: ProfileName = "wpbench",
) -> GenerationResult:
    """Ask `model` for an answer to `test`, with `skills` injected as a system message.

    Args:
        model: LiteLLM model name and sampling settings.
        test: the execution or knowledge test.
        skills: skills for the with-skills variant; empty for the baseline.
        prompt: the user prompt the manifest stored (`ManifestItem.prompt`); built from the test
            when not given. Passing it keeps cluster and local runs byte-identical.
        retry: backoff policy; default from the environment (`RetryPolicy.from_env`).
        profile: the run's execution profile (extraction, knowledge scoring, prompt hash form).
    Returns:
        The candidate and the usage spent; `error` set when no completion could be had.
    """
    prompt = prompt or prompts.build_prompt(test)
    label = candidate_label(model, skills)
    try:
        reply = complete(model, prompts.messages(prompt, skills), retry=retry)
    except ModelCallError as exc:
        return GenerationResult(candidate=Candidate(label=label), usage=exc.usage, error=str(exc))
    if isinstance(test, KnowledgeTest):
        return GenerationResult(candidate=Candidate(raw=reply.text, label=label), usage=reply.usage, answer=reply.text)
    candidate = extract_candidate(reply.text, test.artifact_kind, label, strict=get_profile(profile).strict_extraction)
    if candidate.extraction_error and reply.finish_reason == "length":
        candidate.extraction_error += " (the completion was cut off at max_tokens)"
    return GenerationResult(candidate=candidate, usage=reply.usage)


def generate_for_item(
    manifest: RunManifest,
    item: ManifestItem,
    *,
    retry: RetryPolicy | None = None,
    generator: Generator | None = None,
) -> tuple[ManifestItem, GenerationResult]:
    """The run's generate step, for a local run and the in-cluster controller alike.

    Resolves the item's model, test (from `manifest.tests`) and skills (the manifest's, for the
    with-skills variant), sends the manifest's stored prompt, and returns the item with its candidate
    (and its task carrying it) plus the full result.

    Args:
        retry: backoff policy for `generate_candidate`.
        generator: what writes the candidate instead of `generate_candidate` (tests).
    Raises:
        InputError: the item names a model the manifest does not list.
    """
    model = next((m for m in manifest.models if m.name == item.model), None)
    if model is None:
        raise InputError(f"item {item.item_id}: model {item.model!r} is not in the manifest's models")
    skills = list(manifest.skills) if item.variant == "with-skills" else []
    write = generator or functools.partial(generate_candidate, retry=retry)
    result = write(model, test_from_dict(manifest.tests[item.test_id]), skills, item.prompt or None,
                   profile=manifest.profile)  # fmt: skip
    return item.with_candidate(result.candidate), result
