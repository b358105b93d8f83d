"""Local Docker backend: one fresh, locked-down grader container per task.

It speaks the Engine API through the `docker` library (no CLI process per test). Containers are
prepared ahead of need while others grade: created, attached and started, so the supervisor is
already up and waiting for its task on stdin (the task arrives there, so a started container is not
tied to a task; each still grades exactly one). A grading then only sends the task and reads the
verdict with a bound; the container is removed on a background thread, off the critical path.
`DOCKER_HOST` chooses the engine, as for the CLI.

Fast mode (`execution_isolation: fork_per_test`): the containers are the same, but each starts
`wpbench-grade --sequence` and grades one task after another (one container per running grader, kept
between tests): the executor sends a task line and reads the verdict line and an end line that says
the exit code and whether the supervisor reset the container for another task (`ready`) or ended the
sequence (`closed`, and the container goes). A container that dies mid-test is judged by the same
rules as in container-per-test mode (its exit code, the OOM flag, the engine's kill events).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import secrets
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import docker
import docker.errors
import requests.exceptions
from docker.types import LogConfig

from wpbench_k8s.errors import ExecutorError
from wpbench_k8s.executor.base import Executor, register_executor
from wpbench_k8s.manifest import GraderSpec
from wpbench_k8s.outcome import MAX_GRADER_OUTPUT_BYTES, GraderFacts
from wpbench_runtime.contract import SEQUENCE_END, GradeTask

RUN_LABEL = "org.wpbench-k8s.run"
GRADER_USER = "65532:65532"
_STDERR_TAIL = 65536
# What the engine, the connection or the library raise when the engine is away or refuses.
ENGINE_ERRORS: tuple[type[BaseException], ...] = (
    docker.errors.DockerException,
    requests.exceptions.RequestException,
    OSError,
)


def lockdown_args(spec: GraderSpec) -> list[str]:
    """The isolation flags every grader container gets, as `docker run` flags; see docs/architecture.md.

    `lockdown_host_config` is the same lockdown for the Engine API (tests/harness checks they agree).
    """
    lim = spec.limits
    return [
        "--network", "none",
        "--ipc", "none",  # no /dev/shm: SQLite's temp_store_directory could put files there
        "--read-only",
        "--user", GRADER_USER,
        "--cap-drop", "ALL",
        "--security-opt", "no-new-privileges",
        "--cpus", f"{lim.cpus:g}",
        "--memory", f"{lim.memory_mb}m",
        "--memory-swap", f"{lim.memory_mb}m",
        "--pids-limit", str(lim.pids),
        "--tmpfs", f"/run/wpbench:{_wordpress_tmpfs(spec)}",
        "--tmpfs", f"/tmp:{_tmp_tmpfs(spec)}",
    ]  # fmt: skip


def _wordpress_tmpfs(spec: GraderSpec) -> str:
    return f"rw,noexec,nosuid,size={spec.limits.wordpress_tmpfs_mb}m,uid=65532,gid=65532,mode=0700"


def _tmp_tmpfs(spec: GraderSpec) -> str:
    return f"rw,noexec,nosuid,size={spec.limits.tmp_tmpfs_mb}m,uid=65532,gid=65532,mode=1777"


def lockdown_host_config(
    api: docker.APIClient, spec: GraderSpec, *, cgroup_parent: str | None = None
) -> dict[str, Any]:
    """`lockdown_args` as an Engine API HostConfig, plus a log driver that keeps nothing on the host:
    the executor reads stdout and stderr through the attach stream, bounded, and the engine stores none.
    `cgroup_parent` (make bench only) puts the containers under one cgroup whose CPU counter they all add to."""
    lim = spec.limits
    config: dict[str, Any] = api.create_host_config(
        cgroup_parent=cgroup_parent,
        network_mode="none",
        ipc_mode="none",
        read_only=True,
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        nano_cpus=round(lim.cpus * 1e9),
        mem_limit=f"{lim.memory_mb}m",
        memswap_limit=f"{lim.memory_mb}m",
        pids_limit=lim.pids,
        tmpfs={"/run/wpbench": _wordpress_tmpfs(spec), "/tmp": _tmp_tmpfs(spec)},
        log_config=LogConfig(type="none"),
    )
    return config


def engine_client(timeout: float = 60, pool: int = 10) -> docker.APIClient:
    """An Engine API client for `DOCKER_HOST` (default: the local socket)."""
    base_url = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    return docker.APIClient(base_url=base_url, version="auto", timeout=timeout, max_pool_size=pool)


class _Output:
    """Stdout kept up to MAX_GRADER_OUTPUT_BYTES (the rest drained and dropped), stderr's tail."""

    def __init__(self) -> None:
        self.stdout = bytearray()
        self.truncated = False
        self.stderr = bytearray()

    def add(self, stream: int, data: bytes) -> None:
        if stream == 2:
            self.stderr += data
            if len(self.stderr) > 2 * _STDERR_TAIL:
                del self.stderr[:-_STDERR_TAIL]
            return
        room = MAX_GRADER_OUTPUT_BYTES - len(self.stdout)
        if len(data) > room:
            self.truncated = True
        self.stdout += data[: max(room, 0)]


class StreamTimeout(Exception):
    """The attach stream did not end before the deadline."""


def _recv_exact(sock: socket.socket, size: int, deadline: float) -> bytes | None:
    chunks = bytearray()
    while len(chunks) < size:
        left = deadline - time.monotonic()
        if left <= 0:
            raise StreamTimeout
        sock.settimeout(left)
        try:
            data = sock.recv(min(size - len(chunks), 1 << 16))
        except TimeoutError as exc:
            raise StreamTimeout from exc
        if not data:
            return None
        chunks += data
    return bytes(chunks)


def read_attach_stream(sock: socket.socket, deadline: float) -> _Output:
    """Read a multiplexed attach stream (8-byte frame headers) until it ends, keeping bounded output.

    Raises:
        StreamTimeout: the deadline passed first.
        OSError: the connection to the engine broke.
    """
    out = _Output()
    while True:
        header = _recv_exact(sock, 8, deadline)
        if header is None:
            return out
        stream, size = header[0], struct.unpack(">I", header[4:])[0]
        while size:
            part = _recv_exact(sock, min(size, 1 << 16), deadline)
            if part is None:
                return out
            out.add(stream, part)
            size -= len(part)


@dataclass
class _Spare:
    """A container created, attached and started ahead of need: its supervisor waits for a task on stdin."""

    container: str
    sock: socket.socket
    started_at: float  # time.time() just before the start, for the engine's kill events


class _Sequence:
    """A fast-mode container between tests: its supervisor waits for the next task line."""

    def __init__(self, spare: _Spare) -> None:
        self.spare = spare
        self.pending = bytearray()  # stdout read past the last response (none is expected)


def read_response(sock: socket.socket, deadline: float, pending: bytearray) -> tuple[_Output, tuple[int, bool] | None]:
    """Read a fast-mode response: stdout up to the end line, whose exit code and `ready` it returns (None when
    the stream ended first), bounded as `read_attach_stream`, with stderr's tail.

    Raises:
        StreamTimeout: the deadline passed first.
        OSError: the connection to the engine broke.
    """
    out = _Output()
    buffer = pending
    while True:
        end = SEQUENCE_END.search(buffer)
        if end is not None:
            said = int(end.group(1)), end.group(2) == b"ready"  # read before the buffer changes under the match
            out.add(1, bytes(buffer[: end.start()]))
            del buffer[: end.end()]
            return out, said
        if len(buffer) > MAX_GRADER_OUTPUT_BYTES:
            out.add(1, bytes(buffer))
            return out, None
        header = _recv_exact(sock, 8, deadline)
        if header is None:
            out.add(1, bytes(buffer))
            return out, None
        stream, size = header[0], struct.unpack(">I", header[4:])[0]
        while size:
            part = _recv_exact(sock, min(size, 1 << 16), deadline)
            if part is None:
                out.add(1, bytes(buffer))
                return out, None
            if stream == 2:
                out.add(2, part)
            else:
                buffer += part
            size -= len(part)


class PrepareError(Exception):
    """A container could not be created, attached or started (the message says which)."""


@register_executor("docker")
class DockerExecutor(Executor):
    def __init__(self, spec: GraderSpec, run_id: str) -> None:
        super().__init__(spec, run_id)
        self._counter = itertools.count(1)
        self._created = 0
        # Names stay unique when a resumed run (same run id) meets a killed run's leftovers.
        self._prefix = f"wpbench-{run_id[:16]}-{secrets.token_hex(3)}"
        self._api: docker.APIClient | None = None
        self._lock = threading.Lock()
        self._spares: deque[Future[_Spare]] = deque()
        self._grading = 0  # run_grader calls under way: as many spares are kept ready
        self._fast = spec.execution_isolation == "fork_per_test"
        self._sequences: deque[_Sequence] = deque()  # fast mode: containers waiting for their next task
        # cleanup() closes the executor: no container is created after it, and it waits for creations
        # under way (a grader thread may be creating one as Ctrl-C arrives) before it sweeps by label.
        self._closed = False
        self._creating = 0
        self._idle = threading.Condition(self._lock)
        # Two threads prepare the next containers while graders run; one removes finished ones.
        self._creator = ThreadPoolExecutor(max_workers=2, thread_name_prefix="grader-create")
        self.cgroup_parent: str | None = None  # make bench: one cgroup for all of the run's containers
        self._remover = ThreadPoolExecutor(max_workers=1, thread_name_prefix="grader-remove")

    @property
    def api(self) -> docker.APIClient:
        if self._api is None:
            self._api = engine_client(pool=32)
        return self._api

    def preflight(self) -> GraderSpec:
        try:
            self.api.ping()
        except ENGINE_ERRORS as exc:
            raise ExecutorError(
                f"Docker engine not reachable; run `make docker` (scripts/ensure-docker.sh): {exc}"
            ) from exc
        try:
            image_id = self.api.inspect_image(self.spec.image)["Id"]
        except docker.errors.ImageNotFound as exc:
            raise ExecutorError(
                f"grader image {self.spec.image} not found; build it with `make runtime-image`"
            ) from exc
        except ENGINE_ERRORS as exc:
            raise ExecutorError(f"cannot inspect grader image {self.spec.image}: {exc}") from exc
        # Containers start from the resolved id, so a rebuild of the tag mid-run cannot change what
        # later tests run on while the records name the first image.
        self.spec = self.spec.model_copy(update={"image_id": image_id})
        return self.spec

    def engine_ready(self) -> bool:
        # A fresh connection: a kept-alive one can still reach a daemon that is shutting down and no
        # longer accepts new connections (every create would fail while the ping says yes).
        probe = None
        try:
            probe = engine_client(timeout=10, pool=1)
            return bool(probe.ping())
        except ENGINE_ERRORS:
            # A restarted engine leaves the pool's kept-alive connections dead: start a new client.
            # The spares went with the old engine: prepare new ones.
            self._api = None
            self._discard_spares()
            with self._lock:
                sequences, self._sequences = list(self._sequences), deque()
            for sequence in sequences:
                sequence.spare.sock.close()
                self._remove_later(sequence.spare.container)
            return False
        finally:
            if probe is not None:
                probe.close()

    # ---- containers ---------------------------------------------------------------------------
    def _prepare(self) -> _Spare:
        """Create, attach and start a container; its supervisor then waits for the task on stdin.
        Refused (PrepareError) once cleanup() has begun."""
        with self._lock:
            if self._closed:
                raise PrepareError("the run is stopping: no new grader container")
            self._creating += 1
        try:
            return self._create_and_start()
        finally:
            with self._lock:
                self._creating -= 1
                self._idle.notify_all()

    @property
    def containers_created(self) -> int:
        """How many grader containers this executor has asked the engine for."""
        return self._created

    def _create_and_start(self) -> _Spare:
        number = next(self._counter)
        self._created = number
        name = f"{self._prefix}-{number}"
        try:
            container = str(
                self.api.create_container(
                    self.spec.image_id or self.spec.image,
                    name=name,
                    user=GRADER_USER,
                    stdin_open=True,
                    labels={RUN_LABEL: self.run_id},
                    host_config=lockdown_host_config(self.api, self.spec, cgroup_parent=self.cgroup_parent),
                    command=["--sequence"] if self._fast else None,
                )["Id"]
            )
        except ENGINE_ERRORS as exc:
            raise PrepareError(f"cannot create the grader container: {_short(exc)}") from exc
        # stdin_open without detach also sets StdinOnce (as `docker run -i`): the container's stdin
        # closes when the executor closes its side of the attach stream. Attached before the start,
        # so no output is missed.
        try:
            sock: socket.socket = self.api.attach_socket(
                container, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
            )._sock
        except ENGINE_ERRORS as exc:
            self._remove_later(container)
            raise PrepareError(f"cannot attach to the grader container: {_short(exc)}") from exc
        try:
            started_at = time.time()
            self.api.start(container)
        except ENGINE_ERRORS as exc:
            sock.close()
            self._remove_later(container)
            raise PrepareError(f"cannot start the grader container: {_short(exc)}") from exc
        return _Spare(container, sock, started_at)

    def _take_spare(self) -> _Spare:
        """A started container: one prepared in the background if it is ready, else a new one; either
        way as many are being prepared as graders are running, one for each to take next."""
        with self._lock:
            ready = self._spares.popleft() if self._spares else None
            while not self._closed and len(self._spares) < self._grading:
                self._spares.append(self._creator.submit(self._prepare))
        if ready is not None:
            try:
                return ready.result()
            except PrepareError:
                pass  # the engine may be back: try once more, now
        return self._prepare()

    def _discard_spares(self) -> None:
        with self._lock:
            spares, self._spares = list(self._spares), deque()
        for spare in spares:
            spare.add_done_callback(self._release)

    def _release(self, prepared: Future[_Spare]) -> None:
        """Closes and removes a spare that will not grade (a cancelled one never existed)."""
        if prepared.cancelled() or prepared.exception() is not None:
            return
        spare = prepared.result()
        spare.sock.close()
        self._remove_later(spare.container)

    def _remove_later(self, container: str) -> None:
        try:  # what fails here, cleanup() removes by label
            self._remover.submit(self._remove_quietly, container)
        except RuntimeError:  # the executor is shutting down
            self._remove_quietly(container)

    def run_grader(self, task: GradeTask) -> GraderFacts:
        wall = task.budget_seconds + self.spec.grace_seconds
        started = time.monotonic()
        deadline = started + wall

        def facts(**seen: Any) -> GraderFacts:
            return GraderFacts.model_validate(
                {"test_id": task.test_id, "duration_ms": int((time.monotonic() - started) * 1000), **seen}
            )

        if self._fast:
            return self._run_in_sequence(task, deadline, facts)
        with self._lock:
            self._grading += 1
        try:
            try:
                spare = self._take_spare()
            except PrepareError as exc:
                return facts(started=False, infra_reason=str(exc))
            try:
                return self._grade_in(spare, task, deadline, facts)
            finally:
                self._remove_later(spare.container)
        finally:
            with self._lock:
                self._grading -= 1

    def _run_in_sequence(self, task: GradeTask, deadline: float, facts: Callable[..., GraderFacts]) -> GraderFacts:
        """Fast mode: the task goes to a container that is waiting for its next one (a new one when none is)."""
        with self._lock:
            sequence = self._sequences.popleft() if self._sequences else None
        if sequence is None:
            try:
                sequence = _Sequence(self._prepare())
            except PrepareError as exc:
                return facts(started=False, infra_reason=str(exc))
        spare, keep = sequence.spare, False
        try:
            try:
                spare.sock.settimeout(max(deadline - time.monotonic(), 0.1))
                spare.sock.sendall(task.model_dump_json().encode() + b"\n")
                output, end = read_response(spare.sock, deadline, sequence.pending)
            except StreamTimeout:
                return facts(deadline_exceeded=True, detail=f"not finished within {self._wall(task):g} s; removed")
            except OSError as exc:
                return facts(stopped_from_outside=True, detail=f"connection to the engine broke: {_short(exc)}")
            if end is None:  # the container ended before its end line: judged as a container that exited
                spare.sock.close()
                return self._facts_after_exit(spare, task, output, deadline, facts)
            exit_code, ready = end
            keep = ready and not output.truncated
            return facts(
                exit_code=exit_code,
                stdout=output.stdout.decode("utf-8", "replace"),
                stdout_truncated=output.truncated,
                stderr=output.stderr[-_STDERR_TAIL:].decode("utf-8", "replace"),
            )
        finally:
            if keep:
                with self._lock:
                    closed = self._closed
                    if not closed:
                        self._sequences.append(sequence)
                keep = not closed
            if not keep:
                spare.sock.close()
                self._remove_later(spare.container)

    def _grade_in(
        self, spare: _Spare, task: GradeTask, deadline: float, facts: Callable[..., GraderFacts]
    ) -> GraderFacts:
        sock = spare.sock
        try:
            sock.settimeout(max(deadline - time.monotonic(), 0.1))
            sock.sendall(task.model_dump_json().encode())
            sock.shutdown(socket.SHUT_WR)
            output = read_attach_stream(sock, deadline)
        except StreamTimeout:
            return facts(deadline_exceeded=True, detail=f"not finished within {self._wall(task):g} s; removed")
        except OSError as exc:
            return facts(stopped_from_outside=True, detail=f"connection to the engine broke: {_short(exc)}")
        finally:
            sock.close()
        return self._facts_after_exit(spare, task, output, deadline, facts)

    def _facts_after_exit(
        self, spare: _Spare, task: GradeTask, output: _Output, deadline: float, facts: Callable[..., GraderFacts]
    ) -> GraderFacts:
        """What a container that has ended (or is ending) says: its exit code, OOM flag and the engine's kills."""
        container = spare.container
        try:
            self.api.wait(container, timeout=max(deadline - time.monotonic(), 1))
            state = self.api.inspect_container(container)["State"]
        except requests.exceptions.ReadTimeout:
            return facts(deadline_exceeded=True, detail=f"not finished within {self._wall(task):g} s; removed")
        except ENGINE_ERRORS as exc:
            return facts(stopped_from_outside=True, detail=f"engine gone while the grader ran: {_short(exc)}")
        code, oom = int(state.get("ExitCode", -1)), bool(state.get("OOMKilled"))
        seen = {
            "exit_code": code,
            "stdout": output.stdout.decode("utf-8", "replace"),
            "stdout_truncated": output.truncated,
            "stderr": output.stderr[-_STDERR_TAIL:].decode("utf-8", "replace"),
        }
        if oom:
            return facts(oom_killed=True, **seen)
        if code != 0:  # a verdict exits 0; only then is it worth asking who ended the container
            signals = self._engine_signals(container, spare.started_at)
            if signals:
                return facts(stopped_from_outside=True, detail=f"the engine sent signal {signals}", **seen)
            if code == 137:
                # SIGKILL of PID 1 with no kill from the engine: the kernel's OOM killer (which the
                # candidate can provoke, even when the engine misses the OOM flag) or the host. Retried,
                # then scored, so a candidate cannot leave the scored set through it.
                return facts(oom_killed=True, detail="SIGKILL with no kill sent by the engine", **seen)
        return facts(**seen)

    def _engine_signals(self, container: str, since: float) -> str:
        """The signals the engine sent the container (docker stop / kill, host pressure through the
        engine): its `kill` events. The executor's own removal at the deadline is handled before."""
        try:
            events = self.api.events(since=int(since) - 1, until=f"{time.time():.9f}", decode=True,
                                     filters={"container": container, "event": "kill"})  # fmt: skip
            return ",".join(str(e.get("Actor", {}).get("Attributes", {}).get("signal", "?")) for e in events)
        except ENGINE_ERRORS:
            return ""

    def _wall(self, task: GradeTask) -> float:
        return task.budget_seconds + self.spec.grace_seconds

    def cleanup(self) -> int:
        """Close the executor and remove every container of the run that is still there (spares, graders
        still running, a container a grader thread was creating meanwhile); returns how many went."""
        with self._lock:
            self._closed = True
            spares, self._spares = list(self._spares), deque()
            sequences, self._sequences = list(self._sequences), deque()
        for sequence in sequences:
            sequence.spare.sock.close()  # its supervisor sees stdin end and exits; the sweep removes it
        self._creator.shutdown(wait=True, cancel_futures=True)
        with self._lock:  # creations under way finish (bounded by the engine client's timeout)
            self._idle.wait_for(lambda: self._creating == 0, timeout=120)
        for spare in spares:
            if spare.done() and not spare.cancelled() and spare.exception() is None:
                spare.result().sock.close()  # its container goes with the sweep below, and is counted
        self._remover.shutdown(wait=True)
        return remove_run_containers(self.run_id, self.api)

    def _remove_quietly(self, container: str) -> None:
        with contextlib.suppress(*ENGINE_ERRORS):
            self.api.remove_container(container, force=True, v=True)


def _short(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:500]


def remove_run_containers(
    run_id: str | None = None, api: docker.APIClient | None = None, *, strict: bool = False
) -> int:
    """Remove grader containers of one run (or of every run when run_id is None). Idempotent.

    Raises:
        ExecutorError: `strict` (the `cleanup` command) and the engine cannot be reached.
    """
    label = f"{RUN_LABEL}={run_id}" if run_id else RUN_LABEL
    try:
        api = api or engine_client()
        found = api.containers(all=True, quiet=True, filters={"label": label})
    except ENGINE_ERRORS as exc:
        if strict:
            where = os.environ.get("DOCKER_HOST") or "the local socket"
            raise ExecutorError(f"Docker engine not reachable at {where}: {_short(exc)}") from exc
        return 0
    removed = 0
    for entry in found:
        try:
            api.remove_container(entry["Id"], force=True, v=True)
            removed += 1
        except docker.errors.NotFound:
            pass
        except ENGINE_ERRORS:
            continue
    return removed
