"""Executor backends. Importing this package registers the built-in ones."""

from wpbench_k8s.executor.base import Executor, executor_names, get_executor, register_executor
from wpbench_k8s.manifest import GraderLimits, GraderSpec

__all__ = ["Executor", "GraderLimits", "GraderSpec", "executor_names", "get_executor", "register_executor"]
