"""A local run end to end: preflight the backend, execute the manifest, stream and finalize outputs."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from wpbench_k8s.cache import CACHED_MODES, VerdictCache
from wpbench_k8s.config import Config
from wpbench_k8s.errors import InputError, OutputWriteError
from wpbench_k8s.executor.base import ENGINE_WAIT_SECONDS, Executor, get_executor
from wpbench_k8s.manifest import RunManifest
from wpbench_k8s.outputs import ResultsWriter, now_iso, run_timestamp, summarize
from wpbench_k8s.pipeline import EngineWait, ItemGrader, execute_manifest
from wpbench_k8s.records import Record
from wpbench_k8s.resume import ResumeState, sidecar_doc
from wpbench_k8s.scoring import counted


def exploit_report(records: list[Record], manifest: RunManifest | None = None) -> dict[str, Any]:
    """Execution tests: per test, the cheats that passed (a test with any is exploitable).
    Knowledge tests: each know-nothing baseline's total against chance (`knowledge_baselines`)."""
    passing: dict[str, list[str]] = defaultdict(list)
    execution = [r for r in records if r.type == "execution"]
    for r in execution:
        if r.scores.execution_pass:
            passing[r.test_id].append(r.variant)
    report: dict[str, Any] = {
        "tests_checked": len({r.test_id for r in execution}),
        "exploitable": dict(sorted(passing.items())),
    }
    knowledge = [r for r in records if r.type == "knowledge"]
    if knowledge and manifest is not None:
        report["knowledge_baselines"] = knowledge_baseline_report(manifest, knowledge)
    return report


def knowledge_baseline_report(manifest: RunManifest, records: list[Record]) -> dict[str, Any]:
    from wpbench_k8s.dataset import KnowledgeTest
    from wpbench_k8s.knowledge_baselines import BASELINES, evaluate

    outcomes: dict[str, list[tuple[KnowledgeTest, float]]] = defaultdict(list)
    for r in counted(records):
        name = r.variant.removeprefix("exploit:")
        outcomes[name].append((KnowledgeTest.model_validate(manifest.tests[r.test_id]), r.scores.correctness))
    results = [evaluate(name, outcomes[name]) for name in BASELINES if outcomes.get(name)]
    return {
        "tests_checked": len({r.test_id for r in records}),
        "baselines": {r.name: r.as_dict() for r in results},
        "above_chance": [r.name for r in results if r.flagged],
    }


def reference_report(records: list[Record]) -> dict[str, Any]:
    """Reference and alternative solutions that fail, keyed `test_id` or `test_id (alternative-N)`."""

    def name(r: Record) -> str:
        return r.test_id if r.variant == "baseline" else f"{r.test_id} ({r.variant})"

    failing = {name(r): f"{r.grader.status}: {r.grader.reason}" for r in records if not r.scores.execution_pass}
    return {
        "tests_checked": len({r.test_id for r in records}),
        "solutions_checked": len(records),
        "failing": dict(sorted(failing.items())),
    }


def mode_sections(manifest: RunManifest, records: list[Record], console: Console | None = None) -> dict[str, Any]:
    """The summary JSON's sections for the run's mode: the exploit or reference report, or, for model
    runs, the model comparison (and Skill Impact), whose tables go to `console`. A local run and
    `wpbench-k8s results` both call this, so their summaries and tables are the same."""
    if manifest.mode == "exploits":
        return {"exploits": exploit_report(records, manifest)}
    if manifest.mode == "reference":
        return {"reference": reference_report(records)}
    if manifest.mode == "models":
        from wpbench_k8s.models import compare

        tables: dict[str, Any] = compare.report(manifest, records, console=console)
        return tables
    return {}


def write_run_report(manifest: RunManifest, summary_path: Path, records_path: Path) -> Path:
    """The HTML report beside a finished run's summary (same name, .html), from the files just written;
    the prompts come from the manifest. `run --report` and `results --report` both call this."""
    from wpbench_k8s.report import write_report

    path = summary_path.with_suffix(".html")
    prompts = {test_id: str(test.get("prompt", "")) for test_id, test in manifest.tests.items()}
    write_report([summary_path], path, prompts=prompts, records=records_path)
    return path


def category_table(records: list[Record], title: str) -> Table:
    table = Table(title=title)
    for col, justify in (("category", "left"), ("tests", "right"), ("passed", "right"), ("pass rate", "right"),
                         ("score", "right"), ("excluded", "right")):  # fmt: skip
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    groups: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        groups[r.category].append(r)
    for cat in sorted(groups):
        good = counted(groups[cat])
        passed = sum(r.scores.execution_pass for r in good)
        score = sum(r.scores.correctness for r in good) / len(good) if good else 0.0
        rate = passed / len(good) if good else 0.0
        table.add_row(cat, str(len(good)), str(passed), f"{rate:.0%}", f"{score:.2f}",
                      str(len(groups[cat]) - len(good)))  # fmt: skip
    good = counted(records)
    passed = sum(r.scores.execution_pass for r in good)
    score = sum(r.scores.correctness for r in good) / len(good) if good else 0.0
    table.add_section()
    table.add_row("TOTAL", str(len(good)), str(passed), f"{(passed / len(good) if good else 0):.0%}", f"{score:.2f}",
                  str(len(records) - len(good)), style="bold")  # fmt: skip
    return table


def _tally_key(record: Record) -> str:
    return "errored" if record.error else ("passed" if record.scores.execution_pass else "failed")


class LocalRun:
    def __init__(
        self,
        config: Config,
        manifest: RunManifest,
        *,
        console: Console,
        executor_name: str | None = None,
        report: bool = False,
        resume: ResumeState | None = None,
        cache: VerdictCache | None = None,
        engine_wait_seconds: float = ENGINE_WAIT_SECONDS,
    ) -> None:
        self.config = config
        self.manifest = resume.manifest if resume else manifest
        self.console = console
        self.executor_name = executor_name or (resume.executor if resume else config.grader.kind)
        self.resume = resume
        self.cache = cache if self.manifest.mode in CACHED_MODES else None
        self.engine_wait_seconds = engine_wait_seconds
        self.report = report

    def _generator(self) -> Any:
        if self.manifest.mode != "models":
            return None
        from wpbench_k8s.models.generate import generate_candidate

        return generate_candidate

    def _writer(self, started: str) -> ResultsWriter:
        if self.resume:
            return ResultsWriter(self.resume.summary_path, self.resume.jsonl_path, kept=self.resume.kept)
        writer = ResultsWriter(Path(self.config.output.path), Path(self.config.output.records_path), run_timestamp())
        writer.write_sidecar(sidecar_doc(self.manifest, summary_path=writer.json_path, jsonl_path=writer.jsonl_path,
                                         executor=self.executor_name, started_at=started,
                                         cache_dir=self.cache.directory if self.cache else None))  # fmt: skip
        return writer

    def _preflight(self, executor: Executor) -> None:
        manifest = self.manifest
        if not any(item.task is not None for item in manifest.items):
            return
        stored = manifest.grader.image_id
        manifest.grader = executor.preflight()
        if self.resume and stored and manifest.grader.image_id != stored:
            raise InputError(
                f"--resume {self.resume.source}: grader image {manifest.grader.image} is now "
                f"{manifest.grader.image_id[:19]}, the run started on {stored[:19]}; resume needs the same image"
            )

    def execute(self) -> int:
        """Run to the end; returns the process exit code."""
        manifest = self.manifest
        executor = get_executor(self.executor_name, manifest.grader, manifest.run_id)
        self._preflight(executor)
        started = self.resume.started_at if self.resume and self.resume.started_at else now_iso()
        try:
            writer = self._writer(started)
        except OutputWriteError as exc:
            self.console.print(f"[red]error[/]: {exc}")
            return exc.exit_code
        kept = {r.item_id for r in writer.records}
        todo = [item for item in manifest.items if item.item_id not in kept]
        progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("[green]{task.fields[passed]} passed[/] [red]{task.fields[failed]} failed[/]"
                       " [yellow]{task.fields[errored]} errored[/]"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            TextColumn("[yellow]{task.fields[waiting]}"),
            console=self.console,
            disable=not self.console.is_terminal,  # CI and pipes get one line per record instead
        )  # fmt: skip
        tally: dict[str, Any] = {"passed": 0, "failed": 0, "errored": 0}
        for record in writer.records:
            tally[_tally_key(record)] += 1
        bar = progress.add_task(f"{manifest.mode} {manifest.suite}", total=len(manifest.items),
                                completed=len(writer.records), waiting="", **tally)  # fmt: skip

        def on_wait(seconds: float | None) -> None:
            text = "" if seconds is None else f"engine not answering: waiting {seconds:.0f} s"
            progress.update(bar, waiting=text)

        grade = ItemGrader(manifest, executor, generate=self._generator(), cache=self.cache,
                           engine_wait=EngineWait(executor, self.engine_wait_seconds, on_wait))  # fmt: skip

        def on_record(record: Record) -> None:
            writer.append(record)
            tally[_tally_key(record)] += 1
            progress.update(bar, advance=1, **tally)
            if progress.disable:
                done, key, status = sum(tally.values()), _tally_key(record), record.grader.status
                shown = key if status == key else f"{key} ({status})"
                self.console.print(f"{done}/{len(manifest.items)} {record.item_id}: {shown}", highlight=False,
                                   markup=False)  # fmt: skip

        resumed = f", resuming: {len(writer.records)} kept, {len(todo)} to grade" if self.resume else ""
        self.console.print(
            f"run {manifest.run_id}: {len(manifest.items)} candidates, {len(manifest.selected_test_ids)} tests, "
            f"executor {self.executor_name}, concurrency {manifest.execution_concurrency}, "
            f"image {manifest.grader.image_id[:19] or manifest.grader.image}, "
            f"cache {'on' if self.cache else 'off'}{resumed}"
        )
        try:
            with progress:
                outcome = execute_manifest(manifest, grade, on_record, items=todo)
        except KeyboardInterrupt:
            removed = executor.cleanup()
            writer.close()
            self.console.print(
                f"[red]interrupted[/]: removed {removed} container(s); {len(writer.records)} record(s) kept in "
                f"{writer.partial_path}; continue with: wpbench-k8s run --resume {writer.partial_path}"
            )
            return 130
        except OutputWriteError as exc:
            executor.cleanup()
            writer.close()
            self.console.print(
                f"[red]error[/]: {exc}\n{len(writer.records)} record(s) kept in {writer.partial_path}; once there is "
                f"room, continue with: wpbench-k8s run --resume {writer.partial_path}"
            )
            return exc.exit_code
        except BaseException:
            executor.cleanup()
            writer.close()
            raise
        executor.cleanup()
        if outcome.aborted:
            writer.close()
            self.console.print(
                f"[red]stopped[/] after an error (continue_on_error is off): {outcome.aborted}\n"
                f"{len(writer.records)} record(s) kept in {writer.partial_path}"
            )
            return 1
        records = writer.records
        extra = mode_sections(manifest, records, self.console)
        summary = summarize(manifest, records, executor=self.executor_name, started_at=started,
                            finished_at=now_iso(), extra=extra)  # fmt: skip
        summary["metadata"]["cache"] = {
            "enabled": self.cache is not None,
            "cached_records": sum(r.cached for r in records),
        }
        try:
            writer.finalize(summary, [i.item_id for i in manifest.items])
        except OutputWriteError as exc:
            self.console.print(
                f"[red]error[/]: {exc}\nevery record is in {writer.partial_path}; once there is room, finish with: "
                f"wpbench-k8s run --resume {writer.partial_path}"
            )
            return exc.exit_code
        code = self._report(records, extra, writer)
        if self.report:  # the run's last line names the report
            path = write_run_report(manifest, writer.json_path, writer.jsonl_path)
            self.console.print(f"report: {path}", soft_wrap=True, highlight=False)
        return code

    def _report(self, records: list[Record], extra: dict[str, Any], writer: ResultsWriter) -> int:
        console = self.console
        console.print(category_table(records, f"{self.manifest.suite} — {self.manifest.mode}"))
        console.print(f"results: {writer.json_path}\nrecords: {writer.jsonl_path}",
                      highlight=False, soft_wrap=True)  # fmt: skip
        if "exploits" in extra:
            exploitable = extra["exploits"]["exploitable"]
            for test_id, cheats in exploitable.items():
                console.print(f"[red]exploitable[/] {test_id}: {', '.join(cheats)}")
            if extra["exploits"]["tests_checked"]:
                console.print(f"{len(exploitable)} of {extra['exploits']['tests_checked']} execution tests exploitable")
            baselines = extra["exploits"].get("knowledge_baselines")
            if baselines:
                for name, b in baselines["baselines"].items():
                    style = "[red]far above chance[/] " if b["flagged"] else ""
                    console.print(f"{style}knowledge baseline {name}: {b['correct']}/{b['tests']} = {b['score']:.1%}"
                                  f" (chance {b['chance']:.1%}, p = {b['p_value']:.3g})")  # fmt: skip
            return 1 if exploitable or (baselines and baselines["above_chance"]) else 0
        if "reference" in extra:
            failing = extra["reference"]["failing"]
            for test_id, why in failing.items():
                console.print(f"[red]reference fails[/] {test_id}: {why[:300]}")
            console.print(f"{len(records) - len(failing)} of {len(records)} reference and alternative solutions pass")
            return 1 if failing else 0
        return 0
