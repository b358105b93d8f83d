"""Local Docker backend: one fresh, locked-down grader container per task."""

from __future__ import annotations

import itertools
import subprocess
import time

from wpbench_k8s.errors import ExecutorError
from wpbench_k8s.executor.base import Executor, GraderSpec, register_executor
from wpbench_k8s.outcome import MAX_GRADER_OUTPUT_BYTES, GraderFacts
from wpbench_runtime.contract import GradeTask

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

    def run_grader(self, task: GradeTask) -> GraderFacts:
        name = f"wpbench-{self.run_id[:24]}-{next(self._counter)}"
        wall = task.timeout_seconds + self.spec.grace_seconds
        started = time.monotonic()

        def facts(**seen: object) -> GraderFacts:
            return GraderFacts.model_validate(
                {"test_id": task.test_id, "duration_ms": int((time.monotonic() - started) * 1000), **seen}
            )

        try:
            proc = subprocess.Popen(
                ["docker", *self.container_args(name)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        except OSError as exc:
            return facts(started=False, infra_reason=f"cannot start docker: {exc}")
        try:
            out, err = proc.communicate(task.model_dump_json().encode(), timeout=wall)
        except subprocess.TimeoutExpired:
            _docker("rm", "-f", "-v", name)
            proc.kill()
            proc.communicate()
            return facts(deadline_exceeded=True, detail=f"not finished within {wall:g} s; removed by the executor")
        code = proc.returncode
        stdout, stderr = out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
        if code in _DOCKER_CLI_FAILURES and not stdout.strip():
            return facts(started=False, infra_reason=f"docker run failed (exit {code}): {stderr.strip()[-500:]}")
        return facts(
            exit_code=code,
            # 137 without a verdict: SIGKILL of the whole container, the cgroup's OOM killer here
            # (the executor's own kill happens only past the deadline, handled above).
            oom_killed=code == 137 and not stdout.strip(),
            stdout=stdout[:MAX_GRADER_OUTPUT_BYTES],
            stdout_truncated=len(out) > MAX_GRADER_OUTPUT_BYTES,
            stderr=stderr[-65536:],
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
