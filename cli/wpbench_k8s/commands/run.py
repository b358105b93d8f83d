"""`wpbench-k8s run`: a whole benchmark run on this machine, one fresh grader container per test."""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import click
from rich.console import Console

from wpbench_k8s.config import Config, ignored_settings, load_config
from wpbench_k8s.errors import InputError
from wpbench_k8s.executor.base import ENGINE_WAIT_SECONDS
from wpbench_k8s.manifest import RunManifest, RunMode, SkillSpec

F = Callable[..., Any]


def _split(values: tuple[str, ...]) -> list[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def run_options(func: F) -> F:
    """Selection and mode flags shared by `run` and `submit` (same names, same meaning)."""
    options = [
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
        click.option("--profile", type=click.Choice(["upstream", "wpbench"]),
                     help="Execution profile: upstream WP-Bench's semantics or ours (default: upstream for "
                          "upstream-format suites, else wpbench; see docs/profiles.md)."),
        click.option("--prompt-templates", type=click.Path(exists=True, file_okay=False, path_type=Path),
                     help="Folder with execution.txt / multiple_choice.txt / short_answer.txt prompt templates."),
    ]  # fmt: skip
    for option in reversed(options):
        func = option(func)
    return func


def config_from_flags(params: dict[str, Any]) -> tuple[Config, RunMode]:
    """Merge flags over the YAML file; decide the run mode."""
    overrides: dict[str, Any] = {}
    simple = {
        "suite": "run.suite",
        "limit": "run.limit",
        "seed": "run.seed",
        "test_type": "run.test_type",
        "execution_concurrency": "run.execution_concurrency",
        "continue_on_error": "run.continue_on_error",
        "runs": "run.runs",
        "timeout_seconds": "grader.timeout_seconds",
        "image": "grader.image",
        "judge_model": "judge.model",
        "profile": "run.profile",
    }
    for flag, key in simple.items():
        if params.get(flag) is not None:
            overrides[key] = params[flag]
    if params.get("dataset_path"):
        overrides["dataset.path"] = str(params["dataset_path"])
    if params.get("test_id"):
        overrides["run.test_ids"] = _split(params["test_id"])
    if params.get("category"):
        overrides["run.categories"] = _split(params["category"])
    if params.get("model_name"):
        overrides["models"] = [{"name": n} for n in _split(params["model_name"])]
    if params.get("skills"):
        overrides["skills.paths"] = [str(p) for p in params["skills"]]
    if params.get("skills_include_references") is not None:
        overrides["skills.include_references"] = params["skills_include_references"]
    if params.get("prompt_templates"):
        overrides["run.prompt_templates"] = str(params["prompt_templates"])
    if params.get("skills_only"):
        overrides["skills.only"] = True
    if params.get("judge_model"):
        overrides["judge.skip"] = False
    if params.get("skip_judge"):
        overrides["judge.skip"] = True
    config = load_config(params.get("config_path"), overrides)
    for warning in ignored_settings(config):
        click.echo(f"warning: {warning}", err=True)
    chosen = [
        m
        for m, on in (
            ("reference", params.get("check_reference_solution") or config.run.check_reference_solution),
            ("exploits", params.get("check_exploits") or config.run.check_exploits),
            ("completions", params.get("completions") is not None),
        )
        if on
    ]
    if len(chosen) > 1:
        raise InputError(
            f"flags: choose one of --check-reference-solution, --check-exploits, --completions (got {chosen})"
        )
    mode: RunMode = chosen[0] if chosen else "models"  # type: ignore[assignment]
    if mode in ("reference", "exploits") and params.get("continue_on_error") is None:
        # A check wants every test's answer, not the first failure.
        config.run.continue_on_error = True
    return config, mode


def load_skills(config: Config) -> list[SkillSpec]:
    if not config.skills.paths:
        return []
    from wpbench_k8s.models.skills import load_skill

    return [load_skill(Path(p), include_references=config.skills.include_references) for p in config.skills.paths]


def plan_from_flags(params: dict[str, Any]) -> tuple[Config, RunManifest]:
    from wpbench_k8s.pipeline import plan_run

    config, mode = config_from_flags(params)
    dry_run = bool(params.get("dry_run") or config.run.dry_run)
    manifest = plan_run(
        config, mode, completions=params.get("completions"), skills=load_skills(config), dry_run=dry_run
    )
    return config, manifest


# Flags that say nothing about what a run grades; with --resume alone the stored manifest is used.
_NOT_PLANNING = {"output_path", "dry_run", "executor_name", "resume_path", "no_cache", "cache_dir",
                 "engine_wait_seconds", "execution_concurrency", "continue_on_error"}  # fmt: skip


def _plans_anything(params: dict[str, Any]) -> bool:
    return any(value not in (None, False, (), "") for key, value in params.items() if key not in _NOT_PLANNING)


def print_selection(console: Console, manifest: RunManifest) -> None:
    from rich.table import Table

    table = Table(
        title=f"{len(manifest.selected_test_ids)} tests selected (seed {manifest.seed}, profile {manifest.profile}, "
        "dry run)"
    )
    for col in ("test id", "type", "category", "difficulty"):
        table.add_column(col)
    for test_id in manifest.selected_test_ids:
        t = manifest.tests[test_id]
        kind = "knowledge" if t.get("type") in ("multiple_choice", "short_answer") else "execution"
        table.add_row(test_id, kind, str(t.get("category", "")), str(t.get("difficulty", "")))
    console.print(table)
    console.print(f"{len(manifest.items)} candidates to grade; manifest {manifest.digest()}")


@click.command("run")
@run_options
@click.option("--output", "output_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Summary JSON path; records go beside it (default output/results.json).")  # fmt: skip
@click.option("--dry-run", is_flag=True, help="List exactly the selected tests; call nothing.")
@click.option("--executor", "executor_name", default=None, help="Execution backend (docker, kubernetes).")
@click.option("--report", "report", is_flag=True, help="Also write the HTML report beside the results (.html).")
@click.option(
    "--resume",
    "resume_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Continue a run from its results_<ts>.jsonl.partial (or finished .jsonl): final verdicts are "
    "kept, infra errors and missing items graded. Other flags, if given, must plan the same run.",
)
@click.option(
    "--no-cache",
    is_flag=True,
    envvar="WPBENCH_NO_CACHE",
    help="Grade everything again instead of reusing cached verdicts (reference, exploit and "
    "--completions runs use the verdict cache by default). Env: WPBENCH_NO_CACHE=1.",
)
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Verdict cache directory (default $WPBENCH_CACHE_DIR or ~/.cache/wpbench-k8s/verdicts).",
)
@click.option(
    "--engine-wait",
    "engine_wait_seconds",
    type=click.FloatRange(min=0),
    default=ENGINE_WAIT_SECONDS,
    show_default=True,
    help="Seconds an infrastructure retry waits for an unanswering engine (e.g. a daemon restart).",
)
def run_command(**params: Any) -> None:
    """Run the benchmark on this machine: one fresh locked-down grader container per test.

    \b
    Examples:
      wpbench-k8s run --check-reference-solution --limit 12 --execution-concurrency 2
      wpbench-k8s run --check-exploits --test-id wpk-hooks-001
      wpbench-k8s run --completions completions.jsonl
      wpbench-k8s run --model-name gpt-4o --model-name gemini/gemini-2.5-flash --limit 20 --report
      wpbench-k8s run --resume output/results_20260101T120000Z.jsonl.partial
    """
    from wpbench_k8s.cache import VerdictCache, default_cache_dir
    from wpbench_k8s.local_run import LocalRun
    from wpbench_k8s.resume import check_same_manifest, load_resume

    console = Console(stderr=True)
    resume = load_resume(params["resume_path"]) if params.get("resume_path") else None
    if resume and not _plans_anything(params):
        config, manifest = config_from_flags(params)[0], resume.manifest
    else:
        config, manifest = plan_from_flags(params)
        if resume:
            check_same_manifest(resume, manifest)
    if resume and params.get("execution_concurrency"):
        resume.manifest.execution_concurrency = params["execution_concurrency"]
    if params.get("output_path"):
        out = params["output_path"]
        config.output.path = str(out)
        config.output.jsonl_path = str(out.with_suffix(".jsonl"))
    if params.get("dry_run") or config.run.dry_run:
        print_selection(Console(), manifest)
        return
    cache = None if params.get("no_cache") else VerdictCache(params.get("cache_dir") or default_cache_dir())
    run = LocalRun(config, manifest, console=console, executor_name=params.get("executor_name"), resume=resume,
                   cache=cache, engine_wait_seconds=params["engine_wait_seconds"], report=params["report"])  # fmt: skip

    def on_term(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    sys.exit(run.execute())


@click.command("cleanup")
@click.option("--run-id", help="Only this run's containers (default: every wpbench-k8s grader container).")
def cleanup_command(run_id: str | None) -> None:
    """Remove grader containers a killed run left behind (idempotent: nothing to remove is fine)."""
    from wpbench_k8s.executor.docker import remove_run_containers

    removed = remove_run_containers(run_id)
    click.echo(f"removed {removed} container(s)")


commands = [run_command, cleanup_command]
