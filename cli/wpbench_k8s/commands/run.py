"""`wpbench-k8s run`: a whole benchmark run on this machine, one fresh grader container per test."""

from __future__ import annotations

import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import click
from rich.console import Console

from wpbench_k8s.commands.flags import emit, flags_from, output_format_option, plain_console
from wpbench_k8s.commands.run_flags import RunFlags, config_from_flags, plan_from_flags, run_options
from wpbench_k8s.errors import InputError
from wpbench_k8s.executor.base import ENGINE_WAIT_SECONDS
from wpbench_k8s.manifest import RunManifest


@dataclass(frozen=True)
class LocalRunFlags:
    """`wpbench-k8s run`: what to grade (RunFlags) and how this machine runs it."""

    run: RunFlags
    output_path: Path | None
    dry_run: bool
    executor_name: str | None
    report: bool
    resume_path: Path | None
    no_cache: bool
    cache_dir: Path | None
    engine_wait_seconds: float
    output_format: str | None = None


def selection_doc(manifest: RunManifest) -> dict[str, Any]:
    """What a dry run would grade, as one document (`--dry-run -o json|yaml`)."""
    tests = []
    for test_id in manifest.selected_test_ids:
        t = manifest.tests[test_id]
        kind = "knowledge" if t.get("type") in ("multiple_choice", "short_answer") else "execution"
        tests.append({"id": test_id, "type": kind, "category": t.get("category"), "difficulty": t.get("difficulty")})
    return {"suite": manifest.suite, "mode": manifest.mode, "profile": manifest.profile, "seed": manifest.seed,
            "manifest_digest": manifest.digest(), "candidates": len(manifest.items), "tests": tests}  # fmt: skip


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
              help="Summary path stem (default output/results.json): a run writes STEM_<start>.json and, beside "
                   "it, STEM_<start>.jsonl (records) and .jsonl.manifest; its last lines name them.")  # fmt: skip
@click.option("--dry-run", is_flag=True, help="List exactly the selected tests; call nothing.")
@output_format_option("-o", "--output-format")
@click.option("--executor", "executor_name", default=None, help="Execution backend (docker, kubernetes).")
@click.option("--report", "report", is_flag=True, help="Also write the HTML report beside the results (.html).")
@click.option(
    "--resume",
    "resume_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Continue a run from its results_<ts>.jsonl.partial (or finished .jsonl): final verdicts are "
    "kept, infra errors and missing items graded, with the verdict cache setting the run started with. Other "
    "flags, if given, must plan the same run.",
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

    Exit codes: 0 done, 1 a check found something (failing reference, passing exploit) or the run stopped at an
    error, 2 bad input (nothing written, nothing started), 3 no Docker engine or image, 5 an output file cannot be
    written, 130 interrupted (every container of the run removed). Outside a terminal: one line per record.

    \b
    Examples:
      wpbench-k8s run --check-reference-solution --limit 12 --execution-concurrency 2
      wpbench-k8s run --check-exploits --test-id wpk-hooks-001
      wpbench-k8s run --completions completions.jsonl
      wpbench-k8s run --model-name gpt-4o --model-name gemini/gemini-2.5-flash --limit 20 --report
      wpbench-k8s run --resume output/results_20260101T120000Z.jsonl.partial
    """
    run_local(flags_from(LocalRunFlags, params))


def run_local(flags: LocalRunFlags) -> None:
    """Plan (or resume) the run the flags describe and execute it; exits with the run's code."""
    from wpbench_k8s.cache import VerdictCache, default_cache_dir
    from wpbench_k8s.local_run import LocalRun
    from wpbench_k8s.resume import check_same_manifest, load_resume

    console = plain_console(stderr=True)
    resume = load_resume(flags.resume_path) if flags.resume_path else None
    if resume and not flags.run.plans_anything():
        config, manifest = config_from_flags(flags.run)[0], resume.manifest
    else:
        config, manifest = plan_from_flags(flags.run, dry_run=flags.dry_run)
        if resume:
            check_same_manifest(resume, manifest, flags.run.given())
    if resume and flags.run.execution_concurrency:
        resume.manifest.execution_concurrency = flags.run.execution_concurrency
    if flags.output_path:
        config.output.path = str(flags.output_path)
        config.output.jsonl_path = str(flags.output_path.with_suffix(".jsonl"))
    if flags.dry_run or config.run.dry_run:
        if flags.output_format:
            emit(selection_doc(manifest), flags.output_format)
        else:
            print_selection(plain_console(), manifest)
        return
    if flags.output_format:
        raise InputError("--output-format: only with --dry-run (a run writes its results as JSON files)")
    # A resumed run keeps the cache setting it started with; --no-cache / --cache-dir given now win.
    use_cache = not flags.no_cache and (resume is None or resume.cache_enabled is not False)
    stored_dir = resume.cache_dir if resume else None
    cache = VerdictCache(flags.cache_dir or stored_dir or default_cache_dir()) if use_cache else None
    run = LocalRun(config, manifest, console=console, executor_name=flags.executor_name, resume=resume,
                   cache=cache, engine_wait_seconds=flags.engine_wait_seconds, report=flags.report)  # fmt: skip

    def on_term(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    sys.exit(run.execute())


@click.command("cleanup")
@click.option("--run-id", help="Remove this run's grader containers (its id is in the run's first line).")
@click.option(
    "--all",
    "all_runs",
    is_flag=True,
    help="Remove every wpbench-k8s grader container on the engine, other users' live runs included.",
)
def cleanup_command(run_id: str | None, all_runs: bool) -> None:
    """Remove grader containers a killed run left behind (idempotent: nothing to remove is fine).

    Needs --run-id RUN or --all. Exit 3 when the Docker engine cannot be reached.
    """
    from wpbench_k8s.executor.docker import remove_run_containers

    if bool(run_id) == all_runs:
        raise click.UsageError("give --run-id RUN (one run's containers) or --all (every run's), not both or neither")
    removed = remove_run_containers(run_id or None, strict=True)
    click.echo(f"removed {removed} container(s)")


commands = [run_command, cleanup_command]
