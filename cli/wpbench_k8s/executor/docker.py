"""Local Docker backend: one fresh, locked-down grader container per task."""

from __future__ import annotations

import itertools
import json
import subprocess
import time

from pydantic import ValidationError

from wpbench_k8s.errors import ExecutorError, InfraError
from wpbench_k8s.executor.base import Executor, GraderSpec, register_executor
from wpbench_runtime.contract import GradeTask, Scores, Verdict, harness_error_verdict

RUN_LABEL = "org.wpbench-k8s.run"
# docker run's own failures (daemon error, cannot invoke, command not found): never the candidate's.
_DOCKER_CLI_FAILURES = {125, 126, 127}


def lockdown_args(spec: GraderSpec) -> list[str]:
    """The isolation flags every grader container gets; see docs/architecture.md."""
    lim = spec.limits
    return [
        "--network", "none",
        "--read-only",
        "--user", "65532:65532",
        "--cap-drop", "ALL",
        "--security-opt", "no-new-privileges",
        "--cpus", f"{lim.cpus:g}",
        "--memory", f"{lim.memory_mb}m",
        "--memory-swap", f"{lim.memory_mb}m",
        "--pids-limit", str(lim.pids),
        "--tmpfs", f"/run/wpbench:rw,noexec,nosuid,size={lim.wordpress_tmpfs_mb}m,uid=65532,gid=65532,mode=0700",
        "--tmpfs", f"/tmp:rw,noexec,nosuid,size={lim.tmp_tmpfs_mb}m,uid=65532,gid=65532,mode=1777",
    ]  # fmt: skip


def _docker(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=False)


@register_executor("docker")
class DockerExecutor(Executor):
    def __init__(self, spec: GraderSpec, run_id: str) -> None:
        super().__init__(spec, run_id)
        self._counter = itertools.count(1)

    def preflight(self) -> GraderSpec:
        try:
            info = _docker("info", "--format", "{{.ServerVersion}}")
        except FileNotFoundError as exc:
            raise ExecutorError("docker CLI not found; run `make docker` (scripts/ensure-docker.sh)") from exc
        if info.returncode != 0:
            raise ExecutorError(
                "Docker engine not reachable; run `make docker` (scripts/ensure-docker.sh): " + info.stderr.strip()
            )
        image = _docker("image", "inspect", "--format", "{{.Id}}", self.spec.image)
        if image.returncode != 0:
            raise ExecutorError(f"grader image {self.spec.image} not found; build it with `make runtime-image`")
        # Containers start from the resolved id, so a rebuild of the tag mid-run cannot change what
        # later tests run on while the records name the first image.
        self.spec = self.spec.model_copy(update={"image_id": image.stdout.strip()})
        return self.spec

    def container_args(self, name: str) -> list[str]:
        return [
            "run", "-i", "--rm", "--name", name,
            "--label", f"{RUN_LABEL}={self.run_id}",
            *lockdown_args(self.spec),
            self.spec.image_id or self.spec.image,
        ]  # fmt: skip

    def grade(self, task: GradeTask) -> Verdict:
        name = f"wpbench-{self.run_id[:24]}-{next(self._counter)}"
        wall = task.timeout_seconds + self.spec.grace_seconds
        started = time.monotonic()
        proc = subprocess.Popen(
            ["docker", *self.container_args(name)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            out, err = proc.communicate(task.model_dump_json(), timeout=wall)
        except subprocess.TimeoutExpired:
            _docker("rm", "-f", "-v", name)
            proc.kill()
            proc.communicate()
            return Verdict(
                test_id=task.test_id,
                status="timeout",
                reason=f"grader container did not finish within {wall:g} s; removed by the executor",
                scores=Scores(execution_pass=False, runtime=0.0, static=0.0, static_policy_pass=False),
                duration_ms=int((time.monotonic() - started) * 1000),
            )
        return self._verdict_from(task, proc.returncode, out, err, started)

    def _verdict_from(self, task: GradeTask, code: int, out: str, err: str, started: float) -> Verdict:
        if code in _DOCKER_CLI_FAILURES and not out.strip():
            raise InfraError(f"docker run failed (exit {code}): {err.strip()[-500:]}")
        try:
            return Verdict.model_validate(json.loads(out))
        except (json.JSONDecodeError, ValidationError) as exc:
            elapsed = int((time.monotonic() - started) * 1000)
            if code == 137:
                return Verdict(
                    test_id=task.test_id,
                    status="error",
                    reason="grader killed (exit 137): the container hit its memory limit",
                    scores=Scores(execution_pass=False, runtime=0.0, static=0.0, static_policy_pass=False),
                    stderr=err[-65536:],
                    duration_ms=elapsed,
                )
            head = " ".join(out.split())[:200]
            return harness_error_verdict(
                f"grader produced no valid verdict (exit {code}): {exc.__class__.__name__}; stdout began: {head!r}",
                test_id=task.test_id,
                stderr=err[-65536:],
                duration_ms=elapsed,
            )

    def cleanup(self) -> int:
        return remove_run_containers(self.run_id)


def remove_run_containers(run_id: str | None = None) -> int:
    """Remove grader containers of one run (or of every run when run_id is None). Idempotent."""
    label = f"{RUN_LABEL}={run_id}" if run_id else RUN_LABEL
    listed = _docker("ps", "-aq", "--filter", f"label={label}")
    ids = listed.stdout.split()
    if ids:
        _docker("rm", "-f", "-v", *ids, timeout=120)
    return len(ids)
