"""Helpers for the runtime tests: run the real grader image with the Docker executor's lockdown flags.

Every verdict any test gets back is validated with `Verdict.model_validate` (in `Grader.grade`),
so the whole suite doubles as a contract check of the PHP verifier's output.

The image comes from the session fixture `grader_image` (tests/conftest.py): skipped without
Docker or the image, a failure under CI=true. Containers are independent, so each module grades
its tasks concurrently (`Grader.grade_many`) and its tests read the results.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wpbench_k8s.executor.docker import DockerExecutor, lockdown_args
from wpbench_k8s.manifest import GraderSpec
from wpbench_runtime.contract import GradeTask, Verdict

RUN_LABEL = "org.wpbench-k8s.tests"
# This test session's value of the label: the session-end clean-up removes its own leftovers only, never
# the running graders of another test session on the same engine.
SESSION = f"{os.getpid()}-{int(time.time())}"
CONCURRENCY = int(os.environ.get("WPBENCH_TEST_CONCURRENCY", "3"))


@dataclass
class Graded:
    """One grader container's result."""

    verdict: Verdict
    raw: dict[str, Any]
    exit_code: int
    stderr: str
    wall: float

    @property
    def status(self) -> str:
        return self.verdict.status

    def assertion(self, index: int) -> Any:
        (row,) = [a for a in self.verdict.assertions if a.index == index]
        return row

    def explain(self) -> str:
        return json.dumps(self.raw, indent=1)[:6000] + "\nSTDERR:\n" + self.stderr[-2000:]


@dataclass
class Grader:
    image: str
    verdicts: list[Verdict] = field(default_factory=list)
    containers_last_sequence: int = 0  # how many containers the last grade_in_sequence() used

    def argv(self, *extra: str) -> list[str]:
        return [
            "docker",
            "run",
            "-i",
            "--rm",
            "--label",
            f"{RUN_LABEL}={SESSION}",
            *lockdown_args(GraderSpec(image=self.image)),
            *extra,
            self.image,
        ]

    def grade(self, task: Mapping[str, Any] | str, *extra: str, timeout: float = 120) -> Graded:
        """Runs one task (a dict, or raw text for malformed input) and validates the verdict."""
        stdin = task if isinstance(task, str) else json.dumps(task)
        started = time.monotonic()
        proc = subprocess.run(self.argv(*extra), input=stdin, capture_output=True, text=True, timeout=timeout)
        wall = time.monotonic() - started
        assert proc.stdout.count("\n") == 1, (
            f"expected exactly one verdict line (exit {proc.returncode}):\n{proc.stdout[:3000]}\n{proc.stderr}"
        )
        raw = json.loads(proc.stdout)
        verdict = Verdict.model_validate(raw)  # the contract check every test gets
        self.verdicts.append(verdict)
        return Graded(verdict, raw, proc.returncode, proc.stderr, wall)

    def grade_batch(self, tasks: Mapping[str, Mapping[str, Any] | str], workdir: Path) -> dict[str, Graded]:
        """Grades tasks one after another in ONE locked-down container (`wpbench-grade FILE` each).

        Only for tasks the supervisor settles without starting a runner (invalid documents,
        invalid plugin maps, parse errors): nothing of one can reach the next, and a container
        start per case would only cost time.
        """
        workdir.mkdir(parents=True, exist_ok=True)
        workdir.chmod(0o755)
        names = {}
        for i, (name, doc) in enumerate(tasks.items()):
            path = workdir / f"{i:03d}.json"
            path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
            path.chmod(0o644)
            names[f"/tasks/{path.name}"] = name
        argv = self.argv("-v", f"{workdir}:/tasks:ro", "--entrypoint", "/bin/sh")
        started = time.monotonic()
        proc = subprocess.run([*argv, "-c", _batch_script()], capture_output=True, text=True, timeout=300, check=True)
        wall = time.monotonic() - started
        results: dict[str, Graded] = {}
        for chunk in proc.stdout.split("@@task ")[1:]:
            head, _, rest = chunk.partition("\n")
            lines = rest.splitlines()
            (verdict_line,) = [line for line in lines if line.startswith("{")]
            (exit_line,) = [line for line in lines if line.startswith("@@exit ")]
            stderr = "\n".join(line[6:] for line in lines if line.startswith("@@err "))
            raw = json.loads(verdict_line)
            verdict = Verdict.model_validate(raw)
            self.verdicts.append(verdict)
            results[names[head.strip()]] = Graded(verdict, raw, int(exit_line.split()[1]), stderr, wall / len(tasks))
        assert set(results) == set(tasks), proc.stderr
        return results

    def grade_many(self, tasks: Mapping[str, Mapping[str, Any] | str], *extra: str) -> dict[str, Graded]:
        """Grades independent tasks concurrently (`extra`: more `docker run` flags); returns results by name."""
        with ThreadPoolExecutor(max_workers=CONCURRENCY) as pool:
            futures = {name: pool.submit(self.grade, task, *extra) for name, task in tasks.items()}
            return {name: future.result() for name, future in futures.items()}

    def grade_in_sequence(
        self, tasks: Mapping[str, Mapping[str, Any]], *, concurrency: int = CONCURRENCY
    ) -> dict[str, Graded]:
        """Grades tasks in fast mode (`fork_per_test`) through the Docker executor, as a run does: `concurrency`
        containers, each grading one task after another (in the order given), replaced when one ends."""
        executor = DockerExecutor(GraderSpec(image=self.image, execution_isolation="fork_per_test"), f"tests-{SESSION}")
        executor.preflight()

        def one(doc: Mapping[str, Any]) -> Graded:
            started = time.monotonic()
            facts = executor.run_grader(GradeTask.model_validate(doc))
            wall = time.monotonic() - started
            try:
                raw = json.loads(facts.stdout)
            except json.JSONDecodeError as exc:
                raise AssertionError(f"no verdict line in fast mode: {facts!r}") from exc
            verdict = Verdict.model_validate(raw)
            self.verdicts.append(verdict)
            return Graded(verdict, raw, facts.exit_code if facts.exit_code is not None else -1, facts.stderr, wall)

        try:
            with ThreadPoolExecutor(max_workers=concurrency) as pool:
                futures = {name: pool.submit(one, doc) for name, doc in tasks.items()}
                return {name: future.result() for name, future in futures.items()}
        finally:
            self.containers_last_sequence = executor.containers_created
            executor.cleanup()


def wait_for_runner(container: str, seconds: float = 30) -> float | None:
    """Seconds until the container's process list shows the runner (None: not within `seconds`)."""
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        ps = subprocess.run(["docker", "top", container], capture_output=True, text=True, check=False)
        if "runner.php" in ps.stdout:
            return time.monotonic() - started
        time.sleep(0.2)
    return None


def _batch_script() -> str:
    return (
        "for f in /tasks/*.json; do "
        'echo "@@task $f"; /usr/local/bin/wpbench-grade "$f" 2>/tmp/err; echo "@@exit $?"; '
        "sed 's/^/@@err /' /tmp/err; done"
    )


def task(code: str = "", *assertions: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """A GradeTask document for a snippet (fields override; `runtime` merges into runtime_checks)."""
    runtime = {"assertions": list(assertions), **fields.pop("runtime", {})}
    doc: dict[str, Any] = {"test_id": fields.pop("test_id", "rt-test"), "code": code, "runtime_checks": runtime}
    doc.update(fields)
    return doc


def plugin_task(files: dict[str, str], *assertions: dict[str, Any], **fields: Any) -> dict[str, Any]:
    doc = task("", *assertions, **fields)
    del doc["code"]
    doc["artifact_kind"] = "wp_plugin_files"
    doc["files"] = files
    return doc


def leftovers() -> list[str]:
    """Test containers still present (there should be none: they all run with --rm)."""
    out = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label={RUN_LABEL}={SESSION}"], capture_output=True, text=True, check=False
    )
    return out.stdout.split()


PHP_DIR = Path(__file__).resolve().parents[2] / "runtime" / "php"


def php_cases(image: str, cases: Path, *php_flags: str, stdin: str | None = None) -> dict[str, Any]:
    """Run a PHP cases file (tests/runtime/php/*.php, which requires verifier parts from /src) with the
    grader image's PHP, no ini, no network; its one JSON line of outcomes. `stdin` is given to it."""
    argv = ["docker", "run", "--rm", *(["-i"] if stdin is not None else []), "--network", "none"]
    argv += ["-v", f"{PHP_DIR}:/src:ro", "-v", f"{cases}:/cases.php:ro"]
    argv += ["--entrypoint", "php", image, "-n", *php_flags, "/cases.php"]
    proc = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout)
    return result
