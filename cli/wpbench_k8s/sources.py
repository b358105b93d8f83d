"""Candidate sources: where each run mode's candidates come from, laid out as manifest items.

One source per mode (reference solutions, the exploit battery, a completions file, models), each
behind the `CandidateSource` protocol; `plan_run` picks one and never branches on the mode itself.
Nothing here calls a model or a grader.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from wpbench_k8s import upstream_compat
from wpbench_k8s.candidates import alternative_candidates, exploit_battery, load_completions, reference_candidate
from wpbench_k8s.dataset import AnyTest, ExecutionTest, KnowledgeTest, Suite
from wpbench_k8s.errors import InputError
from wpbench_k8s.knowledge_baselines import baseline_completions
from wpbench_k8s.manifest import Candidate, GraderSpec, ManifestItem, ModelSpec, prompt_hash
from wpbench_k8s.profiles import Profile, ProfileName, is_upstream
from wpbench_runtime.contract import GradeTask

REFERENCE_MODEL = "reference-solution"
EXPLOIT_MODEL = "exploit-battery"


@dataclass(frozen=True)
class Plan:
    """What every source lays its items out against: the suite, the selected tests, grader, profile."""

    suite: Suite
    selected: list[AnyTest]
    grader: GraderSpec
    profile: Profile


class CandidateSource(Protocol):
    """Lays out one manifest item per candidate to grade for the selected tests."""

    def items(self, plan: Plan) -> list[ManifestItem]:
        """The items in run order.

        Raises:
            InputError: the source's input (a completions file, the model list) is missing or bad.
        """
        ...


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40] or "x"


def label_slug(text: str) -> str:
    """A slug that stays unique for long labels: cut to 40 characters, two evasions of one long
    forbidden name (`...-case-comment`, `...-string`) would share an item id; such a label keeps its
    first 31 characters and a digest of the whole label instead."""
    full = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "x"
    if len(full) <= 40:
        return full
    return f"{full[:31].rstrip('-')}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def task_for(test: ExecutionTest, grader: GraderSpec, profile: ProfileName = "wpbench") -> GradeTask:
    """The grader task of one execution test, without a candidate (`ManifestItem.with_candidate` adds it);
    checks are read as the profile reads them."""
    static, runtime = test.static_checks, test.runtime_checks
    if is_upstream(profile):
        static, runtime = (
            upstream_compat.static_checks(static),
            upstream_compat.runtime_checks(runtime, plugin=test.artifact_kind == "wp_plugin_files"),
        )
    return GradeTask(
        test_id=test.id,
        artifact_kind=test.artifact_kind,
        static_checks=static,
        runtime_checks=runtime,
        test_function=test.test_function,
        timeout_seconds=min(test.timeout_seconds or grader.timeout_seconds, grader.timeout_seconds),
        setup_timeout_seconds=grader.setup_timeout_seconds,
    )


def _item(plan: Plan, test: AnyTest, candidate: Candidate | None, **fields: Any) -> ManifestItem:
    task = task_for(test, plan.grader, plan.profile.name) if isinstance(test, ExecutionTest) else None
    item = ManifestItem(test_id=test.id, test_type=test.test_type, task=task, **fields)
    return item.with_candidate(candidate) if candidate is not None else item


class ReferenceSource:
    """Each execution test's reference solution and its alternative solutions (a check of the tests,
    not of a model): every one must pass."""

    def items(self, plan: Plan) -> list[ManifestItem]:
        items = []
        for test in plan.selected:
            assert isinstance(test, ExecutionTest)  # selection is execution-only in this mode
            items.append(_item(plan, test, reference_candidate(test), item_id=test.id, model=REFERENCE_MODEL))
            for i, cand in enumerate(alternative_candidates(test), 1):
                items.append(_item(plan, test, cand, item_id=f"{test.id}--alt-{i}", model=REFERENCE_MODEL,
                                   variant=f"alternative-{i}"))  # fmt: skip
        return items


class ExploitSource:
    """Cheap cheats per execution test (`candidates.exploit_battery`) and the know-nothing baselines
    per knowledge test; rivals for hedged answers come from the whole suite."""

    def items(self, plan: Plan) -> list[ManifestItem]:
        replies = baseline_completions(plan.suite.knowledge)
        items = []
        for test in plan.selected:
            if isinstance(test, KnowledgeTest):
                for name, by_test in replies.items():
                    if test.id in by_test:
                        label = f"exploit:{name}"
                        cand = Candidate(raw=by_test[test.id], label=label)
                        item_id = f"{test.id}--{name}"
                        items.append(_item(plan, test, cand, item_id=item_id, model=EXPLOIT_MODEL, variant=label))
                continue
            for cand in exploit_battery(test):
                item_id = f"{test.id}--{label_slug(cand.label.removeprefix('exploit:'))}"
                items.append(_item(plan, test, cand, item_id=item_id, model=EXPLOIT_MODEL, variant=cand.label))
        return items


@dataclass(frozen=True)
class CompletionsSource:
    """Completions written elsewhere (a JSONL file): code, files, or raw text extracted as a live reply."""

    path: Path | None

    def items(self, plan: Plan) -> list[ManifestItem]:
        if self.path is None:
            raise InputError("--completions: a completions file is required for this mode")
        kinds = {t.id: t.artifact_kind if isinstance(t, ExecutionTest) else "knowledge" for t in plan.suite.all_tests()}
        chosen = {t.id: t for t in plan.selected}
        items = []
        for line in load_completions(self.path, kinds):
            test = chosen.get(line.test_id)
            if test is None:
                continue
            cand = completion_candidate(test, line.code, line.files, line.completion, plan.profile.name)
            items.append(_item(plan, test, cand, item_id=f"{test.id}--{slug(line.model)}--{slug(line.variant)}",
                               model=line.model, variant=line.variant))  # fmt: skip
        if not items:
            raise InputError(f"{self.path}: no completions for the selected tests")
        return items


def completion_candidate(
    test: AnyTest, code: str | None, files: dict[str, str] | None, completion: str | None, profile: ProfileName
) -> Candidate:
    if code is not None or files is not None:
        return Candidate(code=code, files=files, raw=completion or "", label="completion")
    assert completion is not None
    if isinstance(test, KnowledgeTest):
        return Candidate(raw=completion, label="completion")
    from wpbench_k8s.models import extract

    candidate: Candidate = extract.extract_candidate(completion, test.artifact_kind, strict=is_upstream(profile))
    return candidate


@dataclass(frozen=True)
class ModelSource:
    """Items a model will answer: model x variant x repeat x test, each with the prompt it will be sent
    (the candidate stays empty until generation)."""

    models: list[ModelSpec]
    variants: list[str]
    runs: int = 1
    templates: Any | None = None  # wpbench_k8s.models.prompts.PromptTemplates

    def prompt(self, test: AnyTest) -> str:
        from wpbench_k8s.models import prompts  # no litellm import on this path

        text: str = prompts.build_prompt(test, self.templates)
        return text

    def items(self, plan: Plan) -> list[ManifestItem]:
        items = []
        for model in self.models:
            for variant in self.variants:
                for run_no in range(1, self.runs + 1):
                    suffix = f"--r{run_no}" if self.runs > 1 else ""
                    for test in plan.selected:
                        prompt = self.prompt(test)
                        items.append(
                            _item(
                                plan,
                                test,
                                None,
                                item_id=f"{test.id}--{slug(model.name)}--{variant}{suffix}",
                                model=model.name,
                                variant=variant,
                                prompt=prompt,
                                prompt_hash=prompt_hash(prompt, full=plan.profile.full_prompt_hash),
                            )
                        )
        return items
