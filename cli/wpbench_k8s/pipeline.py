"""A grading run as ordered steps: load suite -> select -> plan manifest -> execute -> records.

`plan_run` builds the RunManifest (the same document `submit` sends to the cluster) from the
mode's candidate source (`wpbench_k8s.sources`); `ItemGrader` runs one item through the steps of
`wpbench_k8s.steps` (generate, grade with retries, score, judge) with any executor backend;
`execute_manifest` runs items concurrently and streams records to a sink.
"""

from __future__ import annotations

import concurrent.futures as futures
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wpbench_k8s import steps
from wpbench_k8s.cache import VerdictCache, verdict_key
from wpbench_k8s.config import Config, default_datasets_dir
from wpbench_k8s.dataset import Suite, load_suite
from wpbench_k8s.errors import InputError
from wpbench_k8s.executor.base import ENGINE_WAIT_SECONDS
from wpbench_k8s.manifest import GraderSpec, ManifestItem, ModelSpec, RunManifest, RunMode, SkillSpec
from wpbench_k8s.models.templates import load_templates
from wpbench_k8s.outcome import Infra, Scored
from wpbench_k8s.profiles import Profile, ProfileName, get_profile
from wpbench_k8s.records import Record
from wpbench_k8s.selection import select_tests
from wpbench_k8s.sources import (
    CandidateSource,
    CompletionsSource,
    ExploitSource,
    ModelSource,
    Plan,
    ReferenceSource,
)
from wpbench_k8s.steps import INFRA_ATTEMPTS, RecordJudge

if TYPE_CHECKING:
    from wpbench_k8s.models.generate import GenerationResult, Generator


def load_run_suite(config: Config) -> Suite:
    """The suite a config names: dataset.path (folder or JSONL) or the bundled suites folder."""
    if config.dataset.source == "huggingface" and not config.dataset.path:
        raise InputError(
            "dataset.source: huggingface needs a Hub download, which this machine cannot reach; "
            "export the dataset to JSONL (wpbench-k8s dataset export) and set dataset.path"
        )
    base = Path(config.dataset.path) if config.dataset.path else default_datasets_dir()
    if not config.dataset.path and not (base / config.suite_name).is_dir() and not (base / "execution").is_dir():
        known = sorted(p.name for p in base.iterdir() if p.is_dir()) if base.is_dir() else []
        raise InputError(
            f"--suite {config.suite_name}: no such suite in {base}; suites there: {', '.join(known) or 'none'} "
            "(or point --dataset-path at a suite folder or JSONL)"
        )
    if base.is_file():
        # A JSONL export is filtered only to a suite the user named, never to our default suite.
        return load_suite(base, config.suite_filter)
    return load_suite(base, config.suite_name if not config.dataset.path else None)


def refuse_invalid_tests(suite: Suite) -> None:
    """The errors of `dataset validate` that make a test grade wrong (a forbidden pattern that does not compile
    would silently never fire; `lint.refused_by_run`): an InputError before anything runs."""
    from wpbench_k8s.lint import refused_by_run

    problems = refused_by_run(suite)
    if problems:
        first = problems[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise InputError(f"{suite.source}: {first.where}: {first.message}{more}; see: wpbench-k8s dataset validate "
                         f"{suite.source}")  # fmt: skip


def run_profile(config: Config, suite: Suite) -> ProfileName:
    """The configured profile, else upstream's semantics for an upstream-format suite: scoring v2.0
    (`upstream-v2`) when it has knowledge tests, which v3.0 no longer has, else v3.0 (`upstream`)."""
    if config.run.profile is not None:
        return config.run.profile
    if suite.format != "upstream":
        return "wpbench"
    return "upstream-v2" if suite.knowledge else "upstream"


def model_specs(config: Config, profile: Profile) -> list[ModelSpec]:
    """Models as sent: the profile fills the temperature and request timeout a config leaves unset."""
    specs = []
    for m in config.models:
        temperature = m.temperature if m.temperature is not None else profile.default_temperature
        timeout = m.timeout_seconds if m.timeout_seconds is not None else profile.default_request_timeout
        specs.append(
            ModelSpec(name=m.name, temperature=temperature, max_tokens=m.max_tokens, timeout_seconds=timeout,
                      top_p=m.top_p, kind=m.kind, max_retries=m.max_retries)
        )  # fmt: skip
    return specs


def new_run_id() -> str:
    return secrets.token_hex(6)


def candidate_source(
    config: Config, mode: RunMode, profile: Profile, *, completions: Path | None, with_skills: bool, dry_run: bool
) -> CandidateSource:
    """The source of a mode's candidates, configured from the run's settings."""
    if mode == "reference":
        return ReferenceSource()
    if mode == "exploits":
        return ExploitSource()
    if mode == "completions":
        return CompletionsSource(completions)
    if not config.models and not dry_run:
        raise InputError("models: no model given (set models: in the config or pass --model-name)")
    variants = (["with-skills"] if config.skills.only else ["baseline", "with-skills"]) if with_skills else ["baseline"]
    templates = load_templates(Path(config.run.prompt_templates)) if config.run.prompt_templates else None
    return ModelSource(model_specs(config, profile), variants, config.run.runs, templates)


def plan_run(
    config: Config,
    mode: RunMode,
    *,
    completions: Path | None = None,
    skills: list[SkillSpec] | None = None,
    run_id: str | None = None,
    grader: GraderSpec | None = None,
    dry_run: bool = False,
) -> RunManifest:
    """Select tests and lay out every candidate to grade. Calls no model and no grader.

    `dry_run` plans a model run without models (nothing is called; the selection is what counts).
    """
    suite = load_run_suite(config)
    refuse_invalid_tests(suite)
    profile = get_profile(run_profile(config, suite))
    selected = select_tests(suite, config.run, execution_only=mode == "reference", profile=profile.name)
    if not selected:
        raise InputError("selection: no tests selected (check --test-type, --category, --test-id)")
    grader = grader or GraderSpec(
        image=config.grader.image, timeout_seconds=config.grader.timeout_seconds,
        setup_timeout_seconds=config.grader.setup_timeout_seconds, limits=config.grader.limits,
        execution_isolation=config.run.execution_isolation,
    )  # fmt: skip
    skills = skills or []
    source = candidate_source(config, mode, profile, completions=completions, with_skills=bool(skills), dry_run=dry_run)
    items = source.items(Plan(suite, selected, grader, profile))
    # Records, resume and Job names key on item ids: a test named like another's derived item
    # (`x--alt-1` beside x's first alternative) must stop the run, not overwrite a verdict.
    owners: dict[str, str] = {}
    for item in items:
        if item.item_id in owners:
            twins = f"tests {owners[item.item_id]} and {item.test_id}"
            raise InputError(f"item id {item.item_id} is laid out twice ({twins}): rename one")
        owners[item.item_id] = item.test_id
    models = source.models if isinstance(source, ModelSource) else []
    with_items = {i.test_id for i in items}
    selected_ids = [t.id for t in selected if t.id in with_items or (dry_run and mode == "models")]
    judge, rubric = _judge_settings(config, mode)
    return RunManifest(
        run_id=run_id or new_run_id(),
        suite=suite.name,
        dataset_source=suite.source,
        dataset_digest=suite.digest,
        mode=mode,
        profile=profile.name,
        # Upstream's summary names its own scoring version; ours is the grader contract's.
        **({"scoring_version": profile.scoring} if profile.scoring != "wpbench" else {}),
        seed=config.run.seed,
        selected_test_ids=selected_ids,
        grader=grader,
        execution_concurrency=config.run.execution_concurrency,
        continue_on_error=config.run.continue_on_error,
        models=models,
        skills=skills,
        judge=judge,
        judge_rubric=rubric,
        tests={t.id: t.model_dump(mode="json", exclude_none=True) for t in selected if t.id in selected_ids},
        items=items,
    )


def _judge_settings(config: Config, mode: RunMode) -> tuple[ModelSpec | None, dict[str, Any] | None]:
    """The judge travels in the manifest, so local and cluster runs judge alike."""
    if mode not in ("models", "completions") or config.judge.skip or not config.judge.model:
        return None, None
    from wpbench_k8s.models.judge import judge_spec, load_rubric  # no litellm import on this path

    return judge_spec(config.judge.model), load_rubric(config.judge.rubric).model_dump(mode="json")


def judge_for(manifest: RunManifest) -> RecordJudge | None:
    """The manifest's judge (wpbench_k8s.models.judge.Judge), or None when the run has none."""
    if manifest.judge is None or manifest.judge_rubric is None:
        return None
    from wpbench_k8s.models.judge import Judge, Rubric

    return Judge(manifest.judge, Rubric.model_validate(manifest.judge_rubric))


@dataclass
class EngineWait:
    """Between infrastructure attempts: wait until the backend's engine answers again (a daemon
    restart), so attempts are not spent while it is down. The budget bounds one outage, shared by
    every waiting grader; once an outage has outlasted it, attempts go ahead at once (and fail as infra).

    Returns True when the engine was down and answers again: the attempt that failed meanwhile is
    not counted against the retry budget (it met the outage, not a fault of the task)."""

    executor: steps.GraderRunner
    budget_seconds: float = ENGINE_WAIT_SECONDS
    on_wait: Callable[[float | None], None] | None = None  # seconds waited so far; None when it ends
    poll_seconds: float = 0.5
    _down_since: float | None = field(default=None, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def __call__(self) -> bool:
        saw_down = False
        while not self.executor.engine_ready():
            saw_down = True
            now = time.monotonic()
            with self._lock:
                if self._down_since is None:
                    self._down_since = now
                waited = now - self._down_since
            if waited >= self.budget_seconds:
                return False
            if self.on_wait:
                self.on_wait(waited)
            time.sleep(self.poll_seconds)
        with self._lock:
            self._down_since = None
        if saw_down and self.on_wait:
            self.on_wait(None)
        return saw_down


@dataclass
class ItemGrader:
    """One manifest item to one record: the steps of `wpbench_k8s.steps` in order for a local run
    (generate for model items, grade execution items with retries or from the verdict cache, score, judge)."""

    manifest: RunManifest
    executor: steps.GraderRunner
    generate: Generator | None = None
    attempts: int = INFRA_ATTEMPTS
    # Optional AI judge (wpbench_k8s.models.judge.Judge): fills scores.quality and record.judge.
    judge: RecordJudge | None = None
    # Called after each infrastructure failure (EngineWait): True refunds the attempt (the engine was down).
    engine_wait: Callable[[], bool] | None = None
    cache: VerdictCache | None = None

    def __post_init__(self) -> None:
        if self.judge is None:
            self.judge = judge_for(self.manifest)

    def __call__(self, item: ManifestItem) -> Record:
        manifest = self.manifest
        generation: GenerationResult | None = None
        if item.candidate is None:
            if self.generate is None:
                raise InputError(f"item {item.item_id}: no candidate and no generator")
            from wpbench_k8s.models.generate import generate_for_item  # no litellm import on other paths

            item, generation = generate_for_item(manifest, item, generator=self.generate)
        usage = generation.usage if generation else None
        if generation is not None and generation.error:
            return steps.score_item(manifest, item, usage=usage, error=generation.error)
        graded: steps.Graded | None = None
        cached = False
        if item.needs_grader:
            assert item.task is not None
            key = verdict_key(manifest, item.task) if self.cache else ""
            hit = self.cache.get(key) if self.cache else None
            if hit is not None:
                graded, cached = (Scored(hit), 0), True
            else:
                graded = steps.grade_with_retries(
                    self.executor, item.task, attempts=self.attempts, engine_wait=self.engine_wait
                )
                if self.cache and not isinstance(graded[0], Infra):
                    self.cache.put(key, graded[0].verdict)  # only what a grader decided; never an infra fallback
        record = steps.score_item(manifest, item, graded, usage=usage, answer=generation.answer if generation else None)
        record = steps.judge_record(self.judge, manifest, item, record)
        if cached:
            record.cached = True
        return record


@dataclass
class RunOutcome:
    records: list[Record] = field(default_factory=list)
    aborted: str | None = None  # why the run stopped early (continue_on_error off and an item errored)


def execute_manifest(
    manifest: RunManifest,
    grade_item: Callable[[ManifestItem], Record],
    on_record: Callable[[Record], None],
    *,
    concurrency: int | None = None,
    items: list[ManifestItem] | None = None,
) -> RunOutcome:
    """Grade every item with bounded concurrency; each record goes to `on_record` as it finishes.

    `items` limits the run to some of the manifest's items (a resumed run). With continue_on_error off,
    the first errored record stops new work (running items finish).
    KeyboardInterrupt propagates after pending work is cancelled; the caller cleans up backends.
    """
    outcome = RunOutcome()
    workers = concurrency or manifest.execution_concurrency
    pool = futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="grader")
    try:
        pending = {pool.submit(grade_item, item) for item in (manifest.items if items is None else items)}
        for fut in futures.as_completed(pending):
            if fut.cancelled():
                continue
            record = fut.result()
            on_record(record)
            outcome.records.append(record)
            if record.error and not manifest.continue_on_error and outcome.aborted is None:
                outcome.aborted = f"{record.item_id}: {record.error}"
                for other in pending:
                    other.cancel()
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    return outcome
