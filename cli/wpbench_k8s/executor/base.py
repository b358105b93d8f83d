"""The executor interface: grade one task in a fresh, locked-down grader.

A backend runs `wpbench-grade` from the grader image once per task and returns the verdict.
The rest of the harness sees only this interface; it never knows which backend runs.
"""

from __future__ import annotations

import abc
import importlib
from collections.abc import Callable
from typing import ClassVar

from wpbench_k8s.manifest import GraderSpec
from wpbench_k8s.outcome import GraderFacts
from wpbench_runtime.contract import GradeTask

# How long an infrastructure retry waits for an engine that does not answer (a daemon restart).
ENGINE_WAIT_SECONDS = 120.0


class Executor(abc.ABC):
    """Runs grader containers for one run.

    Backends register with `@register_executor("name")`. One instance serves one run; `grade`
    is called from several threads at once (bounded by the run's execution concurrency).
    """

    name: ClassVar[str]

    def __init__(self, spec: GraderSpec, run_id: str) -> None:
        self.spec = spec
        self.run_id = run_id

    @abc.abstractmethod
    def preflight(self) -> GraderSpec:
        """Check the backend can run (engine reachable, image present).

        Returns:
            The spec with `image_id` resolved.
        Raises:
            ExecutorError: with a message saying what is missing and how to get it.
        """

    @abc.abstractmethod
    def run_grader(self, task: GradeTask) -> GraderFacts:
        """Run one task in a fresh grader and report what was seen, uninterpreted.

        What the facts mean (scored, harness error, infrastructure) is decided in one place for
        every backend: `wpbench_k8s.outcome.decide_outcome`. Never raises for anything the
        candidate does, nor for a failure of the infrastructure (`started=False` says that).
        """

    def engine_ready(self) -> bool:
        """Whether the backend's engine answers now (the retry layer waits for it before retrying)."""
        return True

    @abc.abstractmethod
    def cleanup(self) -> int:
        """Remove everything this run started (idempotent). Returns how many objects went."""


_REGISTRY: dict[str, type[Executor]] = {}
# Built-in backends are imported on first use, so `--help` never pays for the kubernetes client.
BUILTIN_BACKENDS = ("docker", "kubernetes")


def register_executor(name: str) -> Callable[[type[Executor]], type[Executor]]:
    def wrap(cls: type[Executor]) -> type[Executor]:
        cls.name = name
        _REGISTRY[name] = cls
        return cls

    return wrap


def executor_names() -> list[str]:
    return sorted(set(_REGISTRY) | set(BUILTIN_BACKENDS))


def get_executor(name: str, spec: GraderSpec, run_id: str) -> Executor:
    """Instantiate a registered backend; an unknown name lists the known ones."""
    from wpbench_k8s.errors import InputError

    if name not in _REGISTRY and name in BUILTIN_BACKENDS:
        importlib.import_module(f"wpbench_k8s.executor.{name}")
    if name not in _REGISTRY:
        raise InputError(f"unknown executor {name!r}; known executors: {', '.join(executor_names())}")
    return _REGISTRY[name](spec, run_id)
