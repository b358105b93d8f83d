"""The flags `run` and `submit` share (same names, same meaning): what a run grades, as `RunFlags`,
and the one way they become a config, a mode and a run manifest."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import click

from wpbench_k8s.commands.flags import F, add_options
from wpbench_k8s.config import Config, ignored_settings, load_config
from wpbench_k8s.errors import InputError
from wpbench_k8s.manifest import RunManifest, RunMode, SkillSpec
from wpbench_k8s.profiles import PROFILE_NAMES


@dataclass(frozen=True)
class RunFlags:
    """What a run grades and how (each field is the flag of the same name; None/False/() = not given)."""

    config_path: Path | None
    dataset_path: Path | None
    suite: str | None
    model_name: tuple[str, ...]
    limit: int | None
    seed: int | None
    test_id: tuple[str, ...]
    category: tuple[str, ...]
    test_type: str | None
    check_reference_solution: bool
    check_exploits: bool
    completions: Path | None
    execution_concurrency: int | None
    execution_isolation: str | None
    continue_on_error: bool | None
    skills: tuple[Path, ...]
    skills_include_references: bool | None
    skills_only: bool
    runs: int | None
    judge_model: str | None
    skip_judge: bool
    timeout_seconds: float | None
    image: str | None
    profile: str | None
    prompt_templates: Path | None

    def given(self) -> list[str]:
        """The planning flags given, as typed (for messages)."""
        out: list[str] = []
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in {"execution_concurrency", "continue_on_error"} or value in (None, False, (), ""):
                continue
            flag = "--" + {"config_path": "config", "timeout_seconds": "timeout", "skills": "skill"}.get(
                f.name, f.name
            ).replace("_", "-")
            values = value if isinstance(value, tuple) else (value,)
            out.extend(flag if v is True else f"{flag} {v}" for v in values)
        return out

    def plans_anything(self) -> bool:
        """Whether a flag says what to grade (with `run --resume` alone the stored manifest is used)."""
        scheduling = {"execution_concurrency", "continue_on_error"}
        return any(getattr(self, f.name) not in (None, False, (), "") for f in fields(self) if f.name not in scheduling)


def _split(values: tuple[str, ...]) -> list[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def run_options(func: F) -> F:
    """The fields of RunFlags as click options."""
    options: list[Callable[[F], F]] = [
        click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
                     help="wp-bench.yaml (upstream keys accepted unchanged)."),
        click.option("--dataset-path", type=click.Path(path_type=Path),
                     help="Suite folder in WP-Bench layout (execution/*.json, knowledge/*.json) or a JSONL export."),
        click.option("--suite", help="Suite name (default wpk-core-v1)."),
        click.option("--model-name", multiple=True, help="Model in LiteLLM form; repeat for several."),
        click.option("--limit", type=click.IntRange(min=1), help="Seeded subset of this size (upstream: per type)."),
        click.option("--seed", type=int, help="Selection seed (same seed = same subset)."),
        click.option("--test-id", multiple=True, help="Explicit test id(s); repeatable and comma-separated."),
        click.option("--category", multiple=True, help="Category filter; repeatable and comma-separated."),
        click.option("--test-type", type=click.Choice(["all", "execution", "knowledge"]), help="Test type filter."),
        click.option("--check-reference-solution", is_flag=True, help="Grade each test's reference solution."),
        click.option("--check-exploits", is_flag=True,
                     help="Adversarial audit, exit 1 on a finding: trivial cheats and attacks on the grader "
                          "must all fail on execution tests; "
                          "on knowledge tests, know-nothing baselines (always A..D, longest/shortest option, all "
                          "letters, a hedge) must not score far above chance (p < 0.001)."),
        click.option("--completions", type=click.Path(exists=True, dir_okay=False, path_type=Path),
                     help="Grade completions produced elsewhere (JSONL: test_id, model, code|files|completion)."),
        click.option("--execution-concurrency", type=click.IntRange(min=1, max=256), help="Simultaneous graders."),
        click.option("--execution-isolation", type=click.Choice(["reset_per_test", "fork_per_test"]),
                     help="reset_per_test (default; the only mode for published numbers): a fresh grader container "
                          "per test. fork_per_test: fast mode, local Docker only: one container grades tests in "
                          "sequence, each in its own sandboxed process forked from one WordPress boot, on a "
                          "fresh site (runtime/README.md)."),
        click.option("--continue-on-error", is_flag=True, default=None,
                     help="Record per-test errors and keep going (errored tests are excluded from aggregates)."),
        click.option("--skill", "skills", multiple=True, type=click.Path(exists=True, path_type=Path),
                     help="Skills A/B: a directory with SKILL.md or a .md file; repeatable."),
        click.option("--skills-include-references/--no-skills-include-references", "skills_include_references",
                     default=None, help="Inline each skill's references/*.md (default on)."),
        click.option("--skills-only", is_flag=True, help="Skip the baseline pass of a skills run."),
        click.option("--runs", type=click.IntRange(min=1, max=20), help="Repeat model runs N times (mean and std)."),
        click.option("--judge-model", help="AI judge model for code quality (reported separately)."),
        click.option("--skip-judge", is_flag=True, help="Skip the AI judge."),
        click.option("--timeout", "timeout_seconds", type=float, help="Grader timeout per test, seconds."),
        click.option("--image", help="Grader image (default wpbench-grader:dev)."),
        click.option("--profile", type=click.Choice(list(PROFILE_NAMES)),
                     help="Execution profile: upstream WP-Bench's semantics (upstream: scoring v3.0, e19d3a8; "
                          "upstream-v2: scoring v2.0 with knowledge, bf059e2) or ours (default: upstream-v2 for "
                          "upstream-format suites with knowledge tests, upstream for the others, else wpbench; "
                          "see docs/profiles.md)."),
        click.option("--prompt-templates", type=click.Path(exists=True, file_okay=False, path_type=Path),
                     help="Folder with execution.txt / multiple_choice.txt / short_answer.txt prompt templates."),
    ]  # fmt: skip
    return add_options(func, options)


def config_from_flags(flags: RunFlags) -> tuple[Config, RunMode]:
    """Merge flags over the YAML file; decide the run mode."""
    overrides: dict[str, Any] = {}
    simple = {
        "suite": "run.suite",
        "limit": "run.limit",
        "seed": "run.seed",
        "test_type": "run.test_type",
        "execution_concurrency": "run.execution_concurrency",
        "execution_isolation": "run.execution_isolation",
        "continue_on_error": "run.continue_on_error",
        "runs": "run.runs",
        "timeout_seconds": "grader.timeout_seconds",
        "image": "grader.image",
        "judge_model": "judge.model",
        "profile": "run.profile",
    }
    for flag, key in simple.items():
        if getattr(flags, flag) is not None:
            overrides[key] = getattr(flags, flag)
    if flags.dataset_path:
        overrides["dataset.path"] = str(flags.dataset_path)
    # A flag given with nothing in it (`--test-id ,`, `--category ""`) would select the whole suite: refused.
    for flag, values, key in (("--test-id", flags.test_id, "run.test_ids"), ("--category", flags.category,
                              "run.categories"), ("--model-name", flags.model_name, "models")):  # fmt: skip
        if values and not _split(values):
            raise InputError(f"{flag}: empty ({' '.join(repr(v) for v in values)}); name at least one")
        if values:
            overrides[key] = _split(values) if key != "models" else [{"name": n} for n in _split(values)]
    if flags.skills:
        overrides["skills.paths"] = [str(p) for p in flags.skills]
    if flags.skills_include_references is not None:
        overrides["skills.include_references"] = flags.skills_include_references
    if flags.prompt_templates:
        overrides["run.prompt_templates"] = str(flags.prompt_templates)
    if flags.skills_only:
        overrides["skills.only"] = True
    if flags.judge_model:
        overrides["judge.skip"] = False
    if flags.skip_judge:
        overrides["judge.skip"] = True
    config = load_config(flags.config_path, overrides)
    for warning in ignored_settings(config):
        click.echo(f"warning: {warning}", err=True)
    chosen = [
        m
        for m, on in (
            ("reference", flags.check_reference_solution or config.run.check_reference_solution),
            ("exploits", flags.check_exploits or config.run.check_exploits),
            ("completions", flags.completions is not None),
        )
        if on
    ]
    if len(chosen) > 1:
        raise InputError(
            f"flags: choose one of --check-reference-solution, --check-exploits, --completions (got {chosen})"
        )
    mode: RunMode = chosen[0] if chosen else "models"  # type: ignore[assignment]
    if mode == "reference" and config.run.test_type == "knowledge":
        raise InputError(
            "--check-reference-solution grades execution tests' reference solutions; --test-type knowledge selects "
            "none (check knowledge tests with: wpbench-k8s dataset validate)"
        )
    if mode in ("reference", "exploits") and flags.continue_on_error is None:
        # A check wants every test's answer, not the first failure.
        config.run.continue_on_error = True
    return config, mode


def load_skills(config: Config) -> list[SkillSpec]:
    if not config.skills.paths:
        return []
    from wpbench_k8s.models.skills import load_skill

    return [load_skill(Path(p), include_references=config.skills.include_references) for p in config.skills.paths]


def plan_from_flags(flags: RunFlags, *, dry_run: bool = False) -> tuple[Config, RunManifest]:
    """The config and the run manifest the flags (over the config file) describe."""
    from wpbench_k8s.pipeline import plan_run

    config, mode = config_from_flags(flags)
    manifest = plan_run(config, mode, completions=flags.completions, skills=load_skills(config),
                        dry_run=dry_run or config.run.dry_run)  # fmt: skip
    return config, manifest
