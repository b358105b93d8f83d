"""A local run end to end: preflight the backend, execute the manifest, stream and finalize outputs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from wpbench_k8s.cache import CACHED_MODES, VerdictCache
from wpbench_k8s.config import Config
from wpbench_k8s.errors import InputError, OutputWriteError
from wpbench_k8s.executor.base import ENGINE_WAIT_SECONDS, Executor, get_executor
from wpbench_k8s.manifest import RunManifest
from wpbench_k8s.outputs import ResultsWriter, now_iso, run_timestamp
from wpbench_k8s.pipeline import EngineWait, ItemGrader, execute_manifest
from wpbench_k8s.records import Record
from wpbench_k8s.resume import ResumeState, sidecar_doc
from wpbench_k8s.summary import CacheFacts, RunFacts, RunSummary, build_summary
from wpbench_k8s.summary.console import category_table, print_findings, print_model_tables


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
        facts = RunFacts(executor=self.executor_name, started_at=started, finished_at=now_iso(),
                         cache=CacheFacts(enabled=self.cache is not None))  # fmt: skip
        summary = build_summary(manifest, records, facts)
        print_model_tables(summary, self.console)
        try:
            writer.finalize(summary, [i.item_id for i in manifest.items])
        except OutputWriteError as exc:
            self.console.print(
                f"[red]error[/]: {exc}\nevery record is in {writer.partial_path}; once there is room, finish with: "
                f"wpbench-k8s run --resume {writer.partial_path}"
            )
            return exc.exit_code
        code = self._report(records, summary, writer)
        if self.report:  # the run's last line names the report
            from wpbench_k8s.report import write_run_report

            path = write_run_report(manifest, writer.json_path, writer.jsonl_path)
            self.console.print(f"report: {path}", soft_wrap=True, highlight=False)
        return code

    def _report(self, records: list[Record], summary: RunSummary, writer: ResultsWriter) -> int:
        console = self.console
        console.print(category_table(records, f"{self.manifest.suite} — {self.manifest.mode}"))
        console.print(f"results: {writer.json_path}\nrecords: {writer.jsonl_path}",
                      highlight=False, soft_wrap=True)  # fmt: skip
        return print_findings(summary, console)
